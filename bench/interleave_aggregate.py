"""Time the aggregate stage as the user runs it (one whole process each), for several source trees, interleaved.

Each repetition runs every tree once, in turn, so a change in the machine's load hits all of them alike.
Prints per tree the median [min-max] of wall and CPU seconds (user + sys of the child) and the load
average at start and end; checks every tree wrote the same JSON.

    python -m bench.interleave_aggregate --tree base=/tmp/base/src --tree new=src \\
        --params params.yaml --scores scores.parquet --stops stops.parquet --repeat 5
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench.measure import Run, interleaved, run_process

STAGE = Path(__file__).resolve().parent.parent / "stages" / "aggregate.py"


def run_once(src: Path, args: argparse.Namespace, out: Path) -> Run:
    """Wall and CPU seconds of one stage process importing tracevote from `src`."""
    return run_process([sys.executable, str(src.parent / "stages" / "aggregate.py")
                        if (src.parent / "stages").is_dir() else str(STAGE), "--params", str(args.params),
                        "--scores", str(args.scores), "--stops", str(args.stops), "--out", str(out)],
                       Path.cwd(), {**os.environ, "PYTHONPATH": str(src)})


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="name=path of a tree's src folder")
    parser.add_argument("--params", type=Path, required=True)
    parser.add_argument("--scores", type=Path, required=True)
    parser.add_argument("--stops", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.tree)}
    print(f"load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        outs = {name: Path(tmp) / f"{name}.json" for name in trees}
        times = interleaved({name: (lambda src=src, out=outs[name]: run_once(src, args, out))
                             for name, src in trees.items()}, args.repeat)
        first = next(iter(outs.values()))
        same = {name: filecmp.cmp(first, out, shallow=False) for name, out in outs.items()}
    print(f"load average at end:   {os.getloadavg()}")
    for name, runs in times.items():
        print(f"{name:>12}: wall {summary([r.wall for r in runs])} s, CPU {summary([r.cpu for r in runs])} s, "
              f"{args.repeat} runs; output identical to the first tree's: {same[name]}")


if __name__ == "__main__":
    main()
