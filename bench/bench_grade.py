"""Benchmark: `python -m tracevote grade` against a plain main-thread Math-Verify loop, whole processes.

Gold: the shared files ../shared/data/gsm8k_test.jsonl (1,319) and math500_test.jsonl (500), read in place;
skipped, with the reason printed, when they are absent. Predictions are written here, one per gold item,
its gold answer boxed (`content: "#### \\boxed{<gold>}"`, empty thinking): equal to the gold, so every
comparison really runs to the end, but not the same text, as a model's answer is not (a parse remembered for
the gold's text must not also serve the answer's).
Timed, interleaved (grade, loop, grade, loop, ...), wall and CPU seconds (process + children):
- ours: `python -m tracevote grade --dataset D --pred-path P --gold G --json` from an empty folder (no
  params.yaml: grading's defaults, 2 workers, the 5 s hang limit), as a user grades one file;
- baseline: bench/plain_grade.py, `verify(parse(gold), parse(answer))` in a main-thread loop, no limit.
Both report their correct count; they must agree, so the ratio is for the same grades.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.figures import Figure
from bench.measure import Run, interleaved, run_process, stage_env
from bench.synthetic_pool import ROOT

SHARED = ROOT.parent / "shared" / "data"


@dataclass(frozen=True)
class Dataset:
    name: str  # grade's --dataset
    label: str
    file: str


DATASETS = (Dataset("gsm8k", "GSM8K (1,319)", "gsm8k_test.jsonl"), Dataset("math500", "MATH-500", "math500_test.jsonl"))
# (gold rows used, None: all; interleaved rounds; a warm-up run of each side first: not in the suite's quick smoke run)
SCALES = {"full": (None, 3, True), "quick": (40, 1, False)}


def gold_rows(path: Path, limit: int | None) -> list[dict]:
    lines = path.read_bytes().splitlines()
    return [orjson.loads(line) for line in lines[:limit] if line.strip()]


def predictions(dataset: Dataset, rows: list[dict]) -> bytes:
    """One prediction per gold row, its content `#### \\boxed{<gold answer>}`, ids as grade pairs them."""
    out = []
    for index, row in enumerate(rows):
        if dataset.name == "gsm8k":
            item, answer = f"gsm8k_test_{index}", row["answer"].rsplit("####", 1)[-1].strip()
        else:
            item, answer = row["unique_id"], str(row["answer"])
        content = f"#### \\boxed{{{answer}}}"
        out.append(orjson.dumps({"id": item, "dataset": dataset.name, "thinking": "", "content": content}))
    return b"\n".join(out) + b"\n"


def prepare(folder: Path, dataset: Dataset, limit: int | None) -> tuple[Path, Path]:
    """The gold file (the shared one, or its first `limit` rows) and the predictions, in `folder`."""
    source = SHARED / dataset.file
    rows = gold_rows(source, limit)
    gold = source if limit is None else folder / dataset.file
    if limit is not None:
        gold.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    pred = folder / f"{dataset.name}_predictions.jsonl"
    pred.write_bytes(predictions(dataset, rows))
    return gold, pred


def commands(dataset: Dataset, gold: Path, pred: Path) -> dict[str, list[str]]:
    return {
        "grade": [sys.executable, "-m", "tracevote", "grade", "--dataset", dataset.name, "--pred-path", str(pred),
                  "--gold", str(gold), "--json"],
        "plain loop": [sys.executable, str(ROOT / "bench" / "plain_grade.py"), "--gold", str(gold), "--pred",
                       str(pred), "--dataset", dataset.name],
    }


def correct_of(run: Run) -> int:
    record = json.loads(run.output.splitlines()[-1])
    return int(record["correct"])


def bench_dataset(folder: Path, dataset: Dataset, limit: int | None, repeats: int, warm_up: bool) -> Figure:
    gold, pred = prepare(folder, dataset, limit)
    work = folder / dataset.name
    work.mkdir()
    env = stage_env()
    sides = {name: (lambda command=command: run_process(command, work, env, orphans=True))  # grade's fork server
             for name, command in commands(dataset, gold, pred).items()}
    if warm_up:
        for side in sides.values():  # bytecode and page cache
            side()
    runs = interleaved(sides, repeats)
    counts = {name: {correct_of(run) for run in side_runs} for name, side_runs in runs.items()}
    if counts["grade"] != counts["plain loop"]:
        raise AssertionError(f"{dataset.label}: grade counted {counts['grade']} correct, the plain loop "
                             f"{counts['plain loop']}")
    rows = len(gold_rows(gold, None))
    return Figure(f"grade, {dataset.label}", "s", [r.wall for r in runs["grade"]], [r.wall for r in runs["plain loop"]],
                  higher_is_better=False, cpu=[r.cpu for r in runs["grade"]],
                  baseline_cpu=[r.cpu for r in runs["plain loop"]],
                  baseline_name="plain main-thread verify(parse(gold), parse(answer)) loop, whole process",
                  note=f"{rows} predictions equal to the gold, both count {counts['grade'].pop()} correct; "
                       f"{repeats} interleaved rounds; default grading settings (2 workers)")


def run(scale: str = "full") -> list[dict]:
    limit, repeats, warm_up = SCALES[scale]
    missing = [str(SHARED / d.file) for d in DATASETS if not (SHARED / d.file).is_file()]
    if missing:
        return [{"skipped": f"the shared gold files are absent: {', '.join(missing)}"}]
    with tempfile.TemporaryDirectory(prefix="tracevote-bench-grade-") as tmp:
        return [bench_dataset(Path(tmp), dataset, limit, repeats, warm_up).to_json() for dataset in DATASETS]
