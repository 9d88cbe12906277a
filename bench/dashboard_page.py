"""The dashboard's conversation page: server time and query count for the first screen
of a 10,000-message conversation (500 observations, 20 reflections) beside a
100-message one, in the same run, plus the fragments that page loads afterwards.

    .venv/bin/python bench/dashboard_page.py                  # PostgreSQL (recorded)
    .venv/bin/python bench/dashboard_page.py --database sqlite
    .venv/bin/python bench/dashboard_page.py --rounds 100

Server time is measured in process, around Django's full request handling (middleware,
session, sign-in, view, template rendering) through django.test.Client: what a web
worker spends on the request, without the network. Requests to the two conversations
alternate, so both see the same machine load.

Target (dashboard issue): the first screen of the 10,000-message page in at most
150 ms of server time, with a bounded number of queries (the same as for 100 messages).
Creates a database named bench_dashboard_<timestamp> (PostgreSQL) or a file in a
temporary folder (SQLite) and removes it at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import harness
from content import memory_text, message_batch

TARGET_MS = 150.0
PRIORITIES = ("high", "medium", "medium", "low", "completed")


@contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "postgres":
        with harness.fresh_database("bench_dashboard") as url:
            yield url
    else:
        with harness.scratch_dir() as folder:
            yield f"sqlite:///{folder / 'bench.sqlite3'}"


def seed_conversation(
    workspace: Any, *, title: str, messages: int, observations: int, reflections: int, recent: int
) -> Any:
    """One conversation as the pipeline leaves it: observations tiling the observed
    messages (the older ones reflected), reflections over runs of them, the Observer and
    Reflector runs that made them, and ``recent`` unobserved messages at the end."""
    from django.db import transaction
    from django.utils import timezone

    from memory.models import (
        Conversation,
        Message,
        Observation,
        ObserverRun,
        Reflection,
        ReflectorRun,
    )
    from memory.tokens import token_counts

    rng = random.Random(messages)
    now = timezone.now()
    began = now - timedelta(days=30)
    step = timedelta(days=30) / messages
    with transaction.atomic():
        conversation = Conversation.objects.create(
            workspace=workspace,
            user_id=f"user-{messages}",
            title=title,
            last_seq=messages,
            created_at=began,
            updated_at=now,
        )
        bodies = [m for batch in range(-(-messages // 100)) for m in message_batch(batch, 100)]
        bodies = bodies[:messages]
        counts = token_counts([body["content"] for body in bodies])
        rows = [
            Message(
                conversation=conversation,
                seq=seq,
                role=body["role"],
                content=body["content"],
                tool_name=body.get("toolName", ""),
                token_count=tokens,
                created_at=began + step * seq,
            )
            for seq, (body, tokens) in enumerate(zip(bodies, counts, strict=True), start=1)
        ]
        Message.objects.bulk_create(rows, batch_size=1000)
        by_seq = {row.seq: row for row in rows}

        covered = messages - recent
        texts = [memory_text(index, rng.randint(80, 320)) for index in range(observations)]
        observation_rows = []
        for index, (text, tokens) in enumerate(zip(texts, token_counts(texts), strict=True)):
            start = 1 + index * covered // observations
            end = (index + 1) * covered // observations
            first, last = by_seq[start], by_seq[end]
            observation_rows.append(
                Observation(
                    conversation=conversation,
                    text=text,
                    priority=rng.choice(PRIORITIES),
                    observed_at=last.created_at + timedelta(minutes=5),
                    referenced_at=last.created_at + timedelta(days=rng.randint(-20, 20))
                    if rng.random() < 0.2
                    else None,
                    window_start_seq=start,
                    window_end_seq=end,
                    window_start_at=first.created_at,
                    window_end_at=last.created_at,
                    source_message_ids=[
                        str(by_seq[seq].id) for seq in sorted(rng.sample(range(start, end + 1), 2))
                    ],
                    source="observer",
                    engine="extractive",
                    token_count=tokens,
                )
            )
        Observation.objects.bulk_create(observation_rows, batch_size=500)

        # The older four fifths are reflected, as after several Reflector runs.
        per_reflection = max(observations * 4 // 5 // reflections, 1)
        texts = [memory_text(10_000 + index, rng.randint(400, 900)) for index in range(reflections)]
        for index, (text, tokens) in enumerate(zip(texts, token_counts(texts), strict=True)):
            group = observation_rows[index * per_reflection : (index + 1) * per_reflection]
            reflection = Reflection.objects.create(
                conversation=conversation,
                text=text,
                priority=rng.choice(PRIORITIES[:3]),
                generation=1,
                observed_at=group[-1].observed_at + timedelta(minutes=10),
                window_start_seq=group[0].window_start_seq,
                window_end_seq=group[-1].window_end_seq,
                source_observation_ids=[str(o.id) for o in group],
                engine="extractive",
                token_count=tokens,
            )
            Observation.objects.filter(pk__in=[o.pk for o in group]).update(
                status="reflected", reflection=reflection
            )
        runs = 20 if messages >= 1000 else 1
        for index in range(runs):
            start = 1 + index * covered // runs
            end = (index + 1) * covered // runs
            ObserverRun.objects.create(
                conversation=conversation,
                trigger="threshold",
                status="succeeded",
                engine="extractive",
                window_start_seq=start,
                window_end_seq=end,
                tokens_in=sum(by_seq[s].token_count for s in range(start, end + 1)),
                tokens_out=2_000,
                items_in=end - start + 1,
                items_out=observations // runs,
                duration_ms=rng.randint(40, 400),
                created_at=began + step * end,
                finished_at=began + step * end,
            )
        ReflectorRun.objects.create(
            conversation=conversation,
            trigger="threshold",
            status="succeeded",
            engine="extractive",
            generation=1,
            duration_ms=120,
            finished_at=now,
        )
    return conversation


def measure(rounds: int) -> list[dict[str, Any]]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from dashboard.models import Membership
    from memory.models import Observation, Workspace

    workspace = Workspace.objects.create(name="bench")
    started = time.monotonic()
    big = seed_conversation(
        workspace, title="10k", messages=10_000, observations=500, reflections=20, recent=100
    )
    small = seed_conversation(
        workspace, title="100", messages=100, observations=5, reflections=1, recent=10
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would have by now in a running system
    harness.say(f"seeded     in {time.monotonic() - started:.1f} s")
    user = get_user_model().objects.create_user("bench", password="bench-password")
    Membership.objects.create(user=user, workspace=workspace, role="reviewer")
    client = Client()
    client.force_login(user)
    oldest = Observation.objects.filter(conversation=big).order_by("window_start_seq").first()
    htmx = {"HTTP_HX_REQUEST": "true"}
    cases = [
        ("page, 10,000 messages (first screen)", f"/conversations/{big.pk}/", {}),
        ("page, 100 messages (first screen)", f"/conversations/{small.pk}/", {}),
        ("older 50 messages (htmx)", f"/conversations/{big.pk}/messages/?before=9951", htmx),
        (
            "jump to message #1's observation (htmx)",
            f"/conversations/{big.pk}/messages/?highlight={oldest.pk}",
            htmx,
        ),
        ("older 50 observations (htmx)", f"/conversations/{big.pk}/observations/?offset=50", htmx),
        ("raw transcript, 10,000 messages", f"/conversations/{big.pk}/transcript", {}),
        ("conversation list", "/conversations/", {}),
    ]

    def fetch(url: str, headers: dict[str, str]) -> int:
        response = client.get(url, **headers)
        assert response.status_code == 200, (url, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        return len(body)

    busy = harness.wait_for_quiet_machine()
    busy_before = harness.machine_busy_seconds()
    results = []
    for label, url, headers in cases:
        for _ in range(5):  # warm: templates compiled, connection open, caches filled
            fetch(url, headers)
        with CaptureQueriesContext(connection) as queries:
            size = fetch(url, headers)
        results.append(
            {"label": label, "queries": len(queries), "bytes": size, "ms": [], "url": url}
        )
    for _ in range(rounds):
        for result, (_, url, headers) in zip(results, cases, strict=True):
            began = time.perf_counter()
            fetch(url, headers)
            result["ms"].append((time.perf_counter() - began) * 1000)
    busy_after = harness.machine_busy_seconds()
    # The bench itself keeps one core busy; more than that is other work on the machine.
    share = (busy_after[0] - busy_before[0]) / max(busy_after[1] - busy_before[1], 1e-9)
    harness.say(
        f"machine    {busy:.0%} busy before measuring, {share:.0%} of all cores busy while "
        f"measuring (one core of {os.cpu_count()} is the bench itself)"
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--rounds", type=int, default=50)
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
        results = measure(args.rounds)
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
                f"{result['bytes'] / 1024:.0f} KiB",
            ]
        )
    harness.say()
    harness.say(harness.table(["request", "p50 ms", "p95 ms", "max ms", "queries", "body"], rows))
    page_big, page_small = results[0], results[1]
    p95 = harness.percentile(sorted(page_big["ms"]), 0.95)
    same_queries = page_big["queries"] == page_small["queries"]
    harness.say()
    harness.say(
        f"target     10,000-message first screen <= {TARGET_MS:.0f} ms: "
        f"{'met' if p95 <= TARGET_MS else 'NOT met'} (p95 {p95:.1f} ms); queries "
        f"{page_big['queries']} vs {page_small['queries']} for 100 messages "
        f"({'bounded' if same_queries else 'NOT bounded'})"
    )


if __name__ == "__main__":
    main()
