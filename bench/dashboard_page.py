"""The dashboard's conversation page: HTML bytes, server time and queries of the first
screen of a 100-, a 10,000- and a 100,000-message conversation side by side in one run,
plus the fragments that page loads afterwards, the raw transcript and the list.

    .venv/bin/python bench/dashboard_page.py                  # PostgreSQL (recorded)
    .venv/bin/python bench/dashboard_page.py --database sqlite
    .venv/bin/python bench/dashboard_page.py --sizes 100,10000 --rounds 100

Server time is measured in process, around Django's full request handling (middleware,
session, sign-in, view, template rendering) through django.test.Client: what a web
worker spends on the request, without the network. Requests to every case alternate,
round after round, so all see the same machine load.

Each conversation is seeded as the pipeline leaves it after several Reflector runs:
observations and reflections scale with it (100 messages: 5 / 1; 10,000: 500 / 20;
100,000: 5,000 / 200), four fifths of the observations reflected, the newest 10 messages
not observed yet, and one Observer run per 500 messages (at least one). They end alike:
the newest messages, observations and reflections hold the same texts whatever the size.

The page's counts are kept in the cache while the conversation's memory stands (the
in-process cache here; BENCH_CACHE_URL=redis://... for Redis), so the rounds after the
warm-up read them there; the row "after a memory change" moves memory_version before
each of its requests, so it counts everything again, as the first view after an
Observer run or an edit does.

Target (issue 26): the page of the largest conversation at most 1.2x the bytes and the
server time (p50 and p95) of the page at 100 messages, with the same number of queries.
Creates a database named bench_dashboard_<timestamp> (PostgreSQL) or a file in a
temporary folder (SQLite) and removes it at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import harness
from seed import seed_long_conversation

TARGET_RATIO = 1.2
# Messages -> (observations, reflections). The newest 10 messages are not observed yet
# whatever the size: the Observer's threshold bounds that tail, not the conversation.
SHAPES = {100: (5, 1), 10_000: (500, 20), 100_000: (5_000, 200)}
RECENT = 10
DEFAULT_SIZES = "100,10000,100000"
TRANSCRIPT_SIZE = 10_000  # the transcript streams every message: measured where it was


@contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "postgres":
        with harness.fresh_database("bench_dashboard") as url:
            yield url
    else:
        with harness.scratch_dir() as folder:
            yield f"sqlite:///{folder / 'bench.sqlite3'}"


def shape(messages: int) -> tuple[int, int]:
    """Observations and reflections of a conversation of ``messages``: the table's, or one
    observation per 20 messages and one reflection per 25 observations for another size."""
    if messages in SHAPES:
        return SHAPES[messages]
    observations = max(messages // 20, 1)
    return observations, max(observations // 25, 1)


def seed_conversation(workspace: Any, messages: int) -> Any:
    """As the pipeline leaves it after several Reflector runs: the older four fifths of the
    observations reflected, and the runs that made it all recorded. Conversations of
    every size end alike (the same newest texts), so their pages differ only by size."""
    observations, reflections = shape(messages)
    return seed_long_conversation(
        workspace,
        title=f"{messages:,} messages",
        user_id=f"user-{messages}",
        messages=messages,
        observations=observations,
        reflections=reflections,
        recent=min(RECENT, messages // 2),
        rng_seed=messages,
        reflected_share=0.8,
        mark_reflected=True,
        record_runs=True,
        runs=max(messages // 500, 1),
        newest_alike=True,
    )


def measure(rounds: int, sizes: list[int]) -> list[dict[str, Any]]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.db.models import F
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from memory.models import Conversation, Observation
    from tenancy.models import Membership, Workspace

    workspace = Workspace.objects.create(name="bench")
    conversations = {}
    for size in sizes:
        started = time.monotonic()
        conversations[size] = seed_conversation(workspace, size)
        harness.say(f"seeded     {size:,} messages in {time.monotonic() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would have by now in a running system
    user = get_user_model().objects.create_user("bench", password="bench-password")
    Membership.objects.create(user=user, workspace=workspace, role="reviewer")
    client = Client()
    client.force_login(user)
    largest = max(sizes)
    big = conversations[largest]
    oldest = Observation.objects.filter(conversation=big).order_by("window_start_seq").first()
    assert oldest is not None
    htmx = {"HTTP_HX_REQUEST": "true"}

    def memory_changed() -> None:
        # As after an Observer run or an edit: the page's figures are counted again (the
        # request after it keeps them, so the plain page's next round finds them kept).
        Conversation.objects.filter(pk=big.pk).update(memory_version=F("memory_version") + 1)

    cases: list[tuple[str, str, dict[str, str], Callable[[], None] | None]] = [
        (
            f"page, {size:,} messages (first screen)",
            f"/conversations/{conversations[size].pk}/",
            {},
            None,
        )
        for size in sizes
    ]
    transcript_size = TRANSCRIPT_SIZE if TRANSCRIPT_SIZE in sizes else largest
    cases += [
        (
            f"page, {largest:,} messages, after a memory change",
            f"/conversations/{big.pk}/",
            {},
            memory_changed,
        ),
        (
            f"older 50 messages of {largest:,} (htmx)",
            f"/conversations/{big.pk}/messages/?before={largest - 49}",
            htmx,
            None,
        ),
        (
            f"jump to message #1's observation of {largest:,} (htmx)",
            f"/conversations/{big.pk}/messages/?highlight={oldest.pk}",
            htmx,
            None,
        ),
        (
            f"older observations of {largest:,} (htmx)",
            f"/conversations/{big.pk}/observations/?offset=50",
            htmx,
            None,
        ),
        (
            f"raw transcript, {transcript_size:,} messages",
            f"/conversations/{conversations[transcript_size].pk}/transcript",
            {},
            None,
        ),
        ("conversation list", "/conversations/", {}, None),
    ]

    def fetch(url: str, headers: dict[str, str]) -> int:
        response = client.get(url, **headers)
        assert response.status_code == 200, (url, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        return len(body)

    busy = harness.wait_for_quiet_machine()
    harness.say(f"machine    {busy:.0%} busy before measuring")
    busy_before = harness.machine_busy_seconds()
    results = []
    for label, url, headers, before in cases:
        for _ in range(6):  # warm: templates compiled, connection open, caches filled
            if before is not None:
                before()
            fetch(url, headers)
        if before is not None:
            before()
        with CaptureQueriesContext(connection) as queries:
            size = fetch(url, headers)
        results.append(
            {"label": label, "queries": len(queries), "bytes": size, "ms": [], "url": url}
        )
    for _ in range(rounds):
        for result, (_, url, headers, before) in zip(results, cases, strict=True):
            if before is not None:
                before()
            began = time.perf_counter()
            fetch(url, headers)
            result["ms"].append((time.perf_counter() - began) * 1000)
    busy_after = harness.machine_busy_seconds()
    # The bench itself keeps one core busy; more than that is other work on the machine.
    share = (busy_after[0] - busy_before[0]) / max(busy_after[1] - busy_before[1], 1e-9)
    harness.say(
        f"machine    {share:.0%} of all cores busy while measuring (one core of "
        f"{os.cpu_count()} is the bench itself); load average "
        f"{' '.join(f'{value:.2f}' for value in os.getloadavg())}"
    )
    return results


def sizes_arg(raw: str) -> list[int]:
    try:
        sizes = sorted({int(piece.replace("_", "")) for piece in raw.split(",") if piece.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("sizes are whole numbers separated by commas") from None
    if not sizes or sizes[0] < 10:
        raise argparse.ArgumentTypeError("each size is at least 10 messages")
    return sizes


def verdict(big: dict[str, Any], small: dict[str, Any], big_size: int, small_size: int) -> str:
    bytes_ratio = big["bytes"] / small["bytes"]
    p50 = statistics.median(big["ms"]) / statistics.median(small["ms"])
    p95 = harness.percentile(sorted(big["ms"]), 0.95) / harness.percentile(
        sorted(small["ms"]), 0.95
    )
    same = big["queries"] == small["queries"]
    met = max(bytes_ratio, p50, p95) <= TARGET_RATIO and same
    return (
        f"{big_size:,} / {small_size:,} messages: bytes {bytes_ratio:.2f}x, time p50 {p50:.2f}x, "
        f"p95 {p95:.2f}x, queries {big['queries']} vs {small['queries']} "
        f"({'equal' if same else 'NOT equal'}): {'met' if met else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--sizes",
        type=sizes_arg,
        default=sizes_arg(DEFAULT_SIZES),
        help=f"conversation sizes in messages, separated by commas (default {DEFAULT_SIZES})",
    )
    args = parser.parse_args()
    harness.stop_on_sigterm()
    harness.say(harness.machine_line())
    with database(args.database) as url, harness.scratch_dir() as var_dir:
        os.environ.update(harness.django_env(url, var_dir, ALLOWED_HOSTS="testserver,127.0.0.1"))
        sys.path.insert(0, str(harness.ROOT))
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        from django.db import connection

        harness.say(f"database   {connection.vendor}, {args.rounds} rounds")
        results = measure(args.rounds, args.sizes)
        connection.close()

    rows = []
    for result in results:
        ms = sorted(result["ms"])
        rows.append(
            [
                result["label"],
                f"{statistics.median(ms):.1f}",
                f"{harness.percentile(ms, 0.95):.1f}",
                f"{ms[-1]:.1f}",
                str(result["queries"]),
                f"{result['bytes'] / 1024:.1f} KiB",
            ]
        )
    harness.say()
    harness.say(harness.table(["request", "p50 ms", "p95 ms", "max ms", "queries", "body"], rows))
    harness.say()
    pages = dict(zip(args.sizes, results, strict=False))
    smallest = args.sizes[0]
    for size in args.sizes[1:]:
        line = verdict(pages[size], pages[smallest], size, smallest)
        prefix = "target    " if size == args.sizes[-1] else "          "
        harness.say(f"{prefix} {line}")
    harness.say(
        f"           (target: the largest page <= {TARGET_RATIO}x the smallest's bytes and "
        "time, the same queries)"
    )


if __name__ == "__main__":
    main()
