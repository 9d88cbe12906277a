"""The read ledger's cost on a cached context read, with wrk (issue 27: within 1.15x of the
same read with the ledger off, as throughput in one run).

    .venv/bin/python bench/ledger.py                  # 3 rounds of 8 s each, on then off
    .venv/bin/python bench/ledger.py --rounds 5 --seconds 15

Method. A fresh database with bench/load.py's 16 conversations (a memory block and 50
unobserved messages each, the pipeline off); gunicorn with 2 sync workers on the serving
configuration (the ledger written in batches by each worker's thread) and on one whose
recorder is a no-op (bench/gunicorn_no_ledger.py), started in turn, each warmed for 2 s,
then wrk with 24 connections reading the context of a random conversation. Prints reads/s
and p99 per server and the ratio of the means. ``bench/context.py`` measures the same with
Python clients on one long conversation; wrk's lighter clients show the cost better.
"""

from __future__ import annotations

import argparse
import json

import harness
from load import READ_LUA, _lua_list, run_wrk, seed, wrk

TARGET_RATIO = 1.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    if harness.wrk_missing():
        return 2
    harness.stop_on_sigterm()
    harness.say(harness.machine_line())
    configs = {
        "on": harness.SERVING_CONFIG,
        "off": harness.ROOT / "bench" / "gunicorn_no_ledger.py",
    }
    rates: dict[str, list[float]] = {"on": [], "off": []}
    with harness.scratch_dir() as var_dir, harness.fresh_database("bench_ledger") as url:
        env = harness.django_env(url, var_dir, MEMDESK_PIPELINE_ENABLED="0")
        raw_key = harness.prepare_database(env)
        ids = _lua_list(seed(env, 2000))
        script = var_dir / "read.lua"
        text = READ_LUA.replace("{IDS}", ids).replace("KEY", raw_key)
        script.write_text(text.replace("PATH", json.dumps("/context")))
        for _ in range(args.rounds):
            for name in ("on", "off"):
                with harness.gunicorn(env, workers=2, config=configs[name]) as server:
                    run_wrk(wrk(server.port, script, 24, 2.0))  # warm: every worker renders
                    harness.wait_for_quiet_machine()
                    [result] = run_wrk(wrk(server.port, script, 24, args.seconds))
                rates[name].append(result.rate)
                harness.say(
                    f"ledger {name:<3} {result.rate:,.0f} reads/s, p50 {result.p50_ms:.1f} ms, "
                    f"p99 {result.p99_ms:.1f} ms"
                )
    on, off = (sum(rates[k]) / len(rates[k]) for k in ("on", "off"))
    verdict = "met" if off / on <= TARGET_RATIO else "NOT met"
    harness.say(
        f"mean       on {on:,.0f} reads/s, off {off:,.0f} reads/s: off/on {off / on:.3f}x "
        f"(target <= {TARGET_RATIO}x: {verdict})"
    )
    return 0


if __name__ == "__main__":
    harness.run_main(main)
