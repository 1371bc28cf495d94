"""`make bench`: every benchmark, each against its baseline measured in the same run, then the regression guard.

    python -m bench.run              full scale, a few minutes on 2 cores; exits 1 when a headline misses its goal
    python -m bench.run --paper      also paper scale: 30 x 4096 traces x ~3,000 tokens on disk (~3.3 GB, minutes)
    python -m bench.run --quick      small scale, seconds (its figures mean nothing; no guard)
    python -m bench.run --only bench_stage
    python -m bench.run --only bench_online_live   live online DeepConf at 30 problems x 256 traces (~1 h)

Each benchmark runs in a fresh process, so peak-memory figures are its own; the machine's load average is
printed at its start and end. Goals: bench/goals.py.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from bench.figures import Figure, table_lines
from bench.goals import verdicts
from bench.measure import load_average

BENCHMARKS = ("bench_ingest", "bench_stream", "bench_pool", "bench_stage", "bench_score", "bench_aggregate",
              "bench_endpoints", "bench_grade", "bench_n")
PAPER = "bench_paper"  # only with --paper (or --only bench_paper): it needs disk and minutes
LIVE = "bench_online_live"  # only with --only bench_online_live: ~1.7 h of paced streaming at full scale (docs)


class BenchmarkFailed(RuntimeError):
    pass


def run_isolated(name: str, scale: str) -> list[dict]:
    """The figures (as JSON) of one benchmark run in a fresh process."""
    return run_together([name], scale)[name]


def run_together(names: Sequence[str], scale: str) -> dict[str, list[dict]]:
    """The figures (as JSON) of benchmarks run one after another in one fresh process, by name. For the suite's
    quick smoke run, whose figures mean nothing: a process per benchmark would cost more in start-up and imports
    (~0.5 CPU s each) than most quick runs, and a peak-memory figure is then not the benchmark's own."""
    command = [sys.executable, "-m", "bench.run", *(arg for name in names for arg in ("--child", name)),
               "--scale", scale]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise BenchmarkFailed(completed.stderr.strip()[-3000:] or f"exited {completed.returncode}")
    return json.loads(completed.stdout.splitlines()[-1])


def run_one(name: str, scale: str) -> list[Figure] | None:
    """Run and print one benchmark; None when it failed or refused (its reason printed)."""
    load_start, started = load_average(), time.perf_counter()
    try:
        rows = run_isolated(name, scale)
    except BenchmarkFailed as exc:
        print(f"{name} ({scale}): FAILED\n{exc}", flush=True)
        return None
    elapsed = time.perf_counter() - started
    print(f"\n{name} ({scale}, {elapsed:.1f} s; load average {load_start:.2f} at start, {load_average():.2f} at end, "
          f"{os.cpu_count()} cores)", flush=True)
    for row in rows:
        if "skipped" in row:
            print(f"  skipped: {row['skipped']}", flush=True)
    figures = [Figure.from_json(row) for row in rows if "skipped" not in row]
    if figures:
        print("\n".join(table_lines(figures)), flush=True)
    return figures


def guard(figures: list[Figure]) -> int:
    """Print each goal's verdict; 1 when a measured headline missed its goal by more than its noise."""
    results = verdicts(figures)
    print("\nregression guard (bench/goals.py): a goal is missed when even the best round misses it (or, for a goal "
          "judged by the median, when the median does)")
    for verdict in results:
        print(verdict.line())
    missed = [v for v in results if v.missed]
    if missed:
        print(f"\n{len(missed)} goal(s) missed: " + "; ".join(v.goal.figure for v in missed))
    return 1 if missed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small scale, for a smoke run (no guard)")
    parser.add_argument("--paper", action="store_true", help="also measure paper scale (disk: ~3.3 GB, minutes)")
    parser.add_argument("--only", choices=(*BENCHMARKS, PAPER, LIVE), action="append", help="run just these")
    parser.add_argument("--child", choices=(*BENCHMARKS, PAPER, LIVE), action="append", help=argparse.SUPPRESS)
    parser.add_argument("--scale", default="full", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps({name: importlib.import_module(f"bench.{name}").run(args.scale) for name in args.child}))
        return
    scale = "quick" if args.quick else "full"
    names = args.only or [*BENCHMARKS, *([PAPER] if args.paper else [])]
    figures, failed = [], False
    for name in names:
        result = run_one(name, scale)
        failed |= result is None
        figures += result or []
    if args.quick:
        print("\nregression guard: not applied at --quick scale (its figures mean nothing)")
        sys.exit(1 if failed else 0)
    sys.exit(max(guard(figures), int(failed)))


if __name__ == "__main__":
    main()
