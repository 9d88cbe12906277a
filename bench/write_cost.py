"""A write's cost against a cached context read, through the Procfile's web server: a
1-message write and a 10-message bulk beside a cached context read, with one client and
with eight, on PostgreSQL with Redis as cache and broker and the Procfile's worker and
scanner (niceness 10) taking the scans the writes ask for.

    .venv/bin/python bench/write_cost.py                  # 5 s per case, 3 rounds
    .venv/bin/python bench/write_cost.py --seconds 10 --rounds 2

Target (issue 26): a 1-message write at most 1.5x a cached context read's latency (p50,
one client). The in-process figures, without network or server, are
``bench/request_path.py``'s; ``--stages`` there says where a write's time goes.

Method. A fresh database gets 16 conversations as the pipeline leaves them
(``bench/load.py``'s seed, 500 messages each); readers GET the context of eight of them,
which nobody writes to (so every read after the first is a cache hit), writers POST to
the other eight. Each case runs for ``--seconds`` with wrk (one thread, ``--clients``
connections), the cases one after another, ``--rounds`` times in turn so that drift in
the machine's load falls on all of them; the figures are medians over the rounds.
Prints timings only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

import harness
import load

SINGLE_LUA = """
local ids = {IDS}
local words = {WORDS}
wrk.headers["Authorization"] = "Bearer KEY"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local parts = {"Customer says:"}
  for i = 1, math.random(8, 24) do parts[#parts + 1] = words[math.random(#words)] end
  local body = '{"role":"user","content":"' .. table.concat(parts, " ") .. '"}'
  local path = "/v1/conversations/" .. ids[math.random(#ids)] .. "/messages"
  return wrk.format("POST", path, nil, body)
end
"""
TARGET_RATIO = 1.5


def scripts(var_dir: os.PathLike[str], raw_key: str, conversations: list[str]) -> dict[str, str]:
    readers, writers = conversations[:8], conversations[8:]
    words = load._lua_list(load.WORDS)
    texts = {
        "context, cached": load.READ_LUA.replace("{IDS}", load._lua_list(readers)).replace(
            "PATH", json.dumps("/context")
        ),
        "write, 1 message": SINGLE_LUA.replace("{IDS}", load._lua_list(writers)).replace(
            "{WORDS}", words
        ),
        "bulk write, 10 messages": load.WRITE_LUA.replace("{IDS}", load._lua_list(writers))
        .replace("BULK", "10")
        .replace("{WORDS}", words),
    }
    paths = {}
    for number, (case, text) in enumerate(texts.items()):
        path = os.path.join(var_dir, f"case{number}.lua")
        with open(path, "w") as script:
            script.write(text.replace("KEY", raw_key))
        paths[case] = path
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="each case, each round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis-db", type=int, default=10)
    args = parser.parse_args()
    if harness.wrk_missing():
        return 2
    harness.stop_on_sigterm()
    harness.say(harness.machine_line())
    results: dict[tuple[str, int], list[load.WrkResult]] = {}
    with harness.fresh_database("bench_write_cost") as url, harness.scratch_dir() as var_dir:
        env = harness.django_env(url, var_dir)
        raw_key = harness.prepare_database(env)
        env = harness.django_env(
            url,
            var_dir,
            CACHE_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
            CELERY_BROKER_URL=f"redis://127.0.0.1:6379/{args.redis_db + 1}",
        )
        for db in (args.redis_db, args.redis_db + 1):
            subprocess.run(
                ["redis-cli", "-n", str(db), "FLUSHDB"], check=False, capture_output=True
            )
        conversations = load.seed(env, 500)
        paths = scripts(var_dir, raw_key, conversations)
        with (
            harness.gunicorn(env, workers=2) as server,
            load.celery_worker(env, 2, load.PROCFILE_NICENESS),
        ):
            for round_number in range(args.rounds):
                for clients in (1, 8):
                    for case, path in paths.items():
                        harness.wait_for_quiet_machine(max_wait=load.DRAIN_SECONDS)
                        [result] = load.run_wrk(
                            load.wrk(server.port, path, clients, args.seconds)  # type: ignore[arg-type]
                        )
                        results.setdefault((case, clients), []).append(result)
                harness.say(f"round      {round_number + 1} of {args.rounds} done")
    rows = []
    p50 = {}
    for (case, clients), runs in results.items():
        p50[case, clients] = statistics.median(r.p50_ms for r in runs)
        rows.append(
            [
                case,
                str(clients),
                f"{statistics.median(r.rate for r in runs):,.0f}/s",
                f"{p50[case, clients]:.2f}",
                f"{statistics.median(r.p99_ms for r in runs):.2f}",
                str(sum(r.errors for r in runs)),
            ]
        )
    harness.say()
    harness.say(harness.table(["case", "clients", "requests", "p50 ms", "p99 ms", "errors"], rows))
    harness.say()
    for clients in (1, 8):
        read = p50["context, cached", clients]
        for case in ("write, 1 message", "bulk write, 10 messages"):
            ratio = p50[case, clients] / max(read, 1e-9)
            verdict = ""
            if case == "write, 1 message" and clients == 1:
                verdict = (
                    f" (target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'})"
                )
            harness.say(
                f"ratio      {case}, {clients} client(s): {ratio:.2f}x the cached read{verdict}"
            )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    harness.run_main(main)
