"""Benchmark: `python -m tracevote grade` against a plain main-thread loop ``verify(parse(gold), parse(answer))``.

Both sides are whole processes, as a user runs them, on the shared GSM8K (1,319) and MATH-500 (500) gold files with
predictions equal to the gold answers except every fifth (the next row's gold answer: a plausible wrong answer).
The two commands alternate, the first of each pair swapping every repetition, so both see the same load; each
figure is the median over the repetitions with [min-max], wall seconds and CPU seconds (the process and its
children, from RUSAGE_CHILDREN), and the load average at start and end. Goal: `grade` no slower than the loop
(ratio = loop / grade, by the median wall time, >= 1). Skipped, with the reason as its one row, when the shared
data is absent.
    python -m bench.run --only bench_grade [--quick]     (once bench/run.py lists it)
    python -m bench.bench_grade [quick]
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
FILES = {"gsm8k": "gsm8k_test.jsonl", "math500": "math500_test.jsonl"}
SCALES = {"quick": (100, 2), "full": (None, 7)}  # predictions per file (None: every gold item), repetitions
WRONG_EVERY = 5
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float
    stdout: str


def gold_answers(dataset: str, path: Path) -> list[tuple[str, str]]:
    """(id, gold answer) of every row, as `grade` and the loop read them."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if dataset == "gsm8k":
        return [(f"gsm8k_test_{i}", row["answer"].rsplit("####", 1)[1].strip()) for i, row in enumerate(rows)]
    return [(row["unique_id"], row["answer"]) for row in rows]


def write_predictions(dataset: str, out: Path, limit: int | None) -> int:
    """Predictions of the first `limit` gold items: the gold answer, every WRONG_EVERY-th the next row's."""
    gold = gold_answers(dataset, SHARED / FILES[dataset])[:limit]
    lines = []
    for index, (item_id, answer) in enumerate(gold):
        given = gold[(index + 1) % len(gold)][1] if index % WRONG_EVERY == WRONG_EVERY - 1 else answer
        lines.append(json.dumps({"id": item_id, "dataset": dataset, "thinking": f"step {index} then another",
                                 "content": f"So the answer is below.\n#### {given}"}))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def adopt_orphans() -> None:
    """Make this process the reaper of its descendants' orphans (Linux), so that RUSAGE_CHILDREN counts every
    process a command started, a fork server its parent never waits for included."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    """Wait for every adopted orphan to end (a fork server ends once its parent has)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def timed(command: list[str], cwd: Path) -> Timing:
    """Wall seconds of one whole process (until its output closes) and CPU seconds of it and all it started."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, completed.stdout)


def commands(dataset: str, preds: Path) -> dict[str, list[str]]:
    gold = str(SHARED / FILES[dataset])
    return {"grade": [sys.executable, "-m", "tracevote", "grade", "--dataset", dataset, "--pred-path", str(preds),
                      "--gold", gold, "--json"],
            "loop": [sys.executable, str(ROOT / "bench" / "plain_grade_loop.py"), dataset, gold, str(preds)]}


def interleaved(runs: dict[str, list[str]], repetitions: int, cwd: Path) -> dict[str, list[Timing]]:
    """Each command `repetitions` times, alternating, the first of each pair swapping; one warm-up each first."""
    for command in runs.values():
        timed(command, cwd)
    timings: dict[str, list[Timing]] = {name: [] for name in runs}
    names = list(runs)
    for repetition in range(repetitions):
        for name in names if repetition % 2 == 0 else names[::-1]:
            timings[name].append(timed(runs[name], cwd))
    return timings


def correct_counts(timings: dict[str, list[Timing]]) -> tuple[int, int]:
    """How many predictions each side found correct (from the last run of each)."""
    return json.loads(timings["grade"][-1].stdout)["correct"], json.loads(timings["loop"][-1].stdout)["correct"]


def spread(values: list[float]) -> tuple[float, str]:
    return statistics.median(values), f"median of {len(values)} [{min(values):.2f}-{max(values):.2f}]"


def file_rows(dataset: str, timings: dict[str, list[Timing]], predictions: int) -> list[dict[str, Any]]:
    rows = []
    for name in ("grade", "loop"):
        for measure in ("wall_s", "cpu_s"):
            value, note = spread([getattr(timing, measure) for timing in timings[name]])
            rows.append({"name": f"{dataset} ({predictions}): {name} {measure[:-2]}", "value": round(value, 3),
                         "unit": "s", "ratio": None, "note": note})
    grade_wall = statistics.median(t.wall_s for t in timings["grade"])
    loop_wall = statistics.median(t.wall_s for t in timings["loop"])
    ours, theirs = correct_counts(timings)
    rows.append({"name": f"{dataset}: loop / grade, median wall", "value": round(loop_wall / grade_wall, 3),
                 "unit": "x", "ratio": round(loop_wall / grade_wall, 3),
                 "note": f"goal >= 1.0; correct: grade {ours}, loop {theirs}" + ("" if ours == theirs else " DIFFER")})
    return rows


def load_row(when: str) -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    return {"name": f"load average at {when} (1 min)", "value": one, "unit": f"on {os.cpu_count()} cores",
            "ratio": None, "note": f"5 min {five:.2f}, 15 min {fifteen:.2f}"}


def run(scale: str = "full") -> list[dict[str, Any]]:
    """Rows of {name, value, unit, ratio, note}; ratio is the loop's median wall time over grade's."""
    if not all((SHARED / name).is_file() for name in FILES.values()):
        return [{"name": "bench_grade skipped", "value": 0, "unit": "", "ratio": None,
                 "note": f"{SHARED} is absent: this benchmark grades the shared GSM8K and MATH-500 gold files"}]
    limit, repetitions = SCALES[scale]
    adopt_orphans()
    rows = [load_row("start")]
    with tempfile.TemporaryDirectory(prefix="bench_grade_") as folder:
        cwd = Path(folder)  # no params.yaml here: grade's defaults, as for a file graded outside a project
        for dataset in FILES:
            preds = cwd / f"{dataset}_preds.jsonl"
            predictions = write_predictions(dataset, preds, limit)
            rows += file_rows(dataset, interleaved(commands(dataset, preds), repetitions, cwd), predictions)
    return [*rows, load_row("end")]


def main(argv: list[str]) -> None:
    for row in run(argv[0] if argv else "full"):
        print(f"  {row['name']}: {row['value']} {row['unit']}  ({row['note']})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
