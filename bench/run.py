"""`make bench`: every benchmark, each with its baseline measured in the same run.

    python -m bench.run            full scale (a few minutes on 2 cores: it builds a 9 M-token pool)
    python -m bench.run --quick    small scale, seconds
    python -m bench.run --only bench_score

Each benchmark runs in a fresh process, so peak-memory figures are its own.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time

BENCHMARKS = ("bench_ingest", "bench_pool", "bench_stage", "bench_score", "bench_aggregate", "bench_endpoints")


def render(row: dict) -> str:
    ratio = f"  [ratio {row['ratio']:.2f}]" if row.get("ratio") is not None else ""
    note = f"  ({row['note']})" if row.get("note") else ""
    value = row["value"]
    shown = f"{value:.1e}" if 0 < abs(value) < 1e-3 else f"{value:,.3f}"
    return f"  {row['name']}: {shown} {row['unit']}{ratio}{note}"


def run_isolated(name: str, scale: str) -> list[dict]:
    command = [sys.executable, "-m", "bench.run", "--child", name, "--scale", scale]
    completed = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small scale, for a smoke run")
    parser.add_argument("--only", choices=BENCHMARKS, action="append", help="run just these")
    parser.add_argument("--child", choices=BENCHMARKS, help=argparse.SUPPRESS)
    parser.add_argument("--scale", default="full", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(importlib.import_module(f"bench.{args.child}").run(args.scale)))
        return
    scale = "quick" if args.quick else "full"
    for name in args.only or BENCHMARKS:
        started = time.perf_counter()
        rows = run_isolated(name, scale)
        print(f"{name} ({scale}, {time.perf_counter() - started:.1f} s)", flush=True)
        for row in rows:
            print(render(row), flush=True)


if __name__ == "__main__":
    main()
