"""Stress: `python -m tracevote grade` run many times in a row, every run's output kept, to find (or rule out) a
rare failure at start-up or exit, such as the `OSError: [Errno 9] Bad file descriptor` seen once in ~95 runs.

    nice -n 10 .venv/bin/python -m bench.stress_grade --runs 200 --out stress-grade

Each run grades a small predictions file (the first `--items` MATH-500 problems of ../shared/data; skipped,
saying so, when that file is absent) from one folder with no params.yaml, as a user grades one file: grading's
defaults (2 Math-Verify workers forked from the grading process, the 5 s limit). A third of the predictions are
wrong; with `--hang` one is a power tower that sympy never finishes, so the run also kills and replaces its
worker pool mid-run (10 s more per run, a core busy meanwhile). Every run's stdout, stderr and exit code are
written to OUT/run-NNN.txt; the summary line counts the runs that failed, those whose stderr says "Bad file
descriptor" (EBADF) or holds a traceback, and those whose stdout differs from the first run's (grading is
deterministic). Exits 1 when any run failed, differed or printed a traceback. Not part of `make test` or
`make bench`: 200 runs take minutes (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

import orjson

from bench.synthetic_pool import ROOT

SHARED_MATH500 = ROOT.parent / "shared" / "data" / "math500_test.jsonl"
HANG = "$9^{9^{9^{9^{9}}}}$"  # sympy never finishes this one against a number: the 5 s limit kills its worker


def write_inputs(folder: Path, items: int, hang: bool) -> list[str]:
    """The gold and predictions files in `folder`, and the grade arguments that read them."""
    rows = [orjson.loads(line) for line in SHARED_MATH500.read_bytes().splitlines()[:items] if line.strip()]
    gold, predictions = folder / "gold.jsonl", folder / "predictions.jsonl"
    gold.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    lines = []
    for index, row in enumerate(rows):
        answer = str(row["answer"]) if index % 3 else f"{row['answer']} + 1"  # every third one wrong
        content = HANG if hang and index == 5 else f"\\boxed{{{answer}}}"  # row 6's gold is 42
        lines.append(orjson.dumps({"id": row["unique_id"], "dataset": "math500", "thinking": "step " * 20,
                                   "content": f"#### {content}"}) + b"\n")
    predictions.write_bytes(b"".join(lines))
    return ["--dataset", "math500", "--pred-path", str(predictions), "--gold", str(gold)]


def run_once(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracevote", "grade", *arguments]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--items", type=int, default=12, help="MATH-500 problems graded per run")
    parser.add_argument("--out", type=Path, default=Path("stress-grade"), help="folder for every run's output")
    parser.add_argument("--hang", action="store_true", help="one prediction overruns its limit (pool replaced)")
    args = parser.parse_args(argv)
    if not SHARED_MATH500.is_file():
        print(f"stress_grade: skipped: {SHARED_MATH500} is absent")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    work.mkdir(exist_ok=True)
    arguments = write_inputs(work, args.items, args.hang)
    counts: collections.Counter[str] = collections.Counter()
    first_stdout = None
    started = time.perf_counter()
    for number in range(1, args.runs + 1):
        done = run_once([*arguments], work)
        (args.out / f"run-{number:03d}.txt").write_text(
            f"exit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}")
        first_stdout = done.stdout if first_stdout is None else first_stdout
        counts["failed"] += done.returncode != 0
        counts["EBADF"] += "Bad file descriptor" in done.stderr
        counts["traceback"] += "Traceback" in done.stderr
        counts["differs"] += done.stdout != first_stdout
    elapsed = time.perf_counter() - started
    print(f"stress_grade: {args.runs} runs in {elapsed:.0f} s: {counts['failed']} failed, {counts['EBADF']} with "
          f"'Bad file descriptor', {counts['traceback']} with a traceback on stderr, {counts['differs']} with "
          f"stdout unlike the first run's; every run's output in {args.out}/")
    return 1 if counts["failed"] or counts["differs"] or counts["traceback"] else 0


if __name__ == "__main__":
    sys.exit(main())
