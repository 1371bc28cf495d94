"""A DeepConf project of any size for the explorer's tests and benchmark (SYNTHETIC: no model): params.yaml, the
problems file, a synthetic score and stop table (bench.synthetic_scores, marked simulated as a simulated pool's
tables are) and the aggregate, made by the aggregate stage's own script. The explorer reads no pool log for its
index and problem pages, so none is written."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pandas as pd
import yaml

from bench.synthetic_pool import DATASET, bench_params
from bench.synthetic_scores import synthetic_tables
from tracevote.core.parquet import write_parquet

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "</script><img src=x onerror=\"document.title='owned'\"> & \u2028 <!-- x"


@dataclass(frozen=True)
class ToyProject:
    root: Path
    params: Path
    problems: Path
    scores: Path
    aggregate: Path
    golds: dict[str, int]


def write_project(root: Path, problems: int = 3, traces: int = 32, *, simulated: bool = True,
                  ks: tuple[int, ...] = (1, 4, 16), repeat: int = 4, bootstrap: int = 100) -> ToyProject:
    """The project; problem 0's text is HOSTILE, so a page that shows it as HTML would run it."""
    data = bench_params()
    data["model"] = {**data["model"], "backend": "sim"}
    data["eval"] = {**data["eval"], "k": list(ks), "repeat": repeat, "bootstrap": bootstrap}
    data["report"] = {**data["report"], "k": ks[-1]}
    root.mkdir(parents=True, exist_ok=True)
    params = root / "params.yaml"
    params.write_text(yaml.safe_dump(data))
    scores, stops = synthetic_tables(problems, traces)
    golds = _golds(scores)
    problems_file = root / "data" / f"{DATASET}.jsonl"
    problems_file.parent.mkdir(parents=True, exist_ok=True)
    problems_file.write_bytes(b"".join(
        orjson.dumps({"id": pid, "problem": HOSTILE if i == 0 else f"Problem {pid}: find the number.",
                      "answer": gold}) + b"\n" for i, (pid, gold) in enumerate(golds.items())))
    metadata = {"simulated": "true" if simulated else "false", "pool": "synthetic", "model": "synthetic-model",
                "group_size": "2048"}
    score_file = root / "data" / "scores" / f"{DATASET}.parquet"
    stop_file = root / "data" / "scores" / f"{DATASET}.stops.parquet"
    score_file.parent.mkdir(parents=True, exist_ok=True)
    for path, table in ((score_file, scores), (stop_file, stops)):
        write_parquet(path, (rows for _, rows in table.groupby("problem_id", sort=False)), metadata)
    aggregate = root / "data" / "aggregate" / f"{DATASET}.json"
    subprocess.run([sys.executable, str(ROOT / "stages" / "aggregate.py"), "--params", str(params), "--scores",
                    str(score_file), "--stops", str(stop_file), "--out", str(aggregate)],
                   cwd=root, check=True, capture_output=True)
    return ToyProject(root, params, problems_file, score_file, aggregate, golds)


def _golds(scores: pd.DataFrame) -> dict[str, int]:
    """Each problem's gold: the answer of its right traces, else an answer no trace gave."""
    golds = {}
    for pid, rows in scores.groupby("problem_id", sort=True):
        right = rows.loc[rows["correct"], "answer"]
        given = set(rows["answer"].dropna().astype(int))
        golds[str(pid)] = int(right.iloc[0]) if len(right) else min(set(range(1000)) - given)
    return golds
