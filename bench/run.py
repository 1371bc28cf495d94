"""`make bench`: every benchmark, each with its baseline measured in the same run.

    python -m bench.run            full scale (a few minutes on 2 cores)
    python -m bench.run --quick    small scale, seconds
"""

from __future__ import annotations

import argparse
import importlib
import time

BENCHMARKS = ("bench_ingest", "bench_pool", "bench_score", "bench_aggregate")


def render(row: dict) -> str:
    ratio = f"  [ratio {row['ratio']:.2f}]" if row.get("ratio") is not None else ""
    note = f"  ({row['note']})" if row.get("note") else ""
    return f"  {row['name']}: {row['value']:,.3f} {row['unit']}{ratio}{note}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small scale, for a smoke run")
    parser.add_argument("--only", choices=BENCHMARKS, action="append", help="run just these")
    args = parser.parse_args()
    scale = "quick" if args.quick else "full"
    for name in args.only or BENCHMARKS:
        started = time.perf_counter()
        rows = importlib.import_module(f"bench.{name}").run(scale)
        print(f"{name} ({scale}, {time.perf_counter() - started:.1f} s)")
        for row in rows:
            print(render(row))


if __name__ == "__main__":
    main()
