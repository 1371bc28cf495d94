"""`make demo`: the whole pipeline on the simulated model, in a scratch DVC project.

The scratch copy (`demo/`, ignored by git and DVC) gets this repository's dvc.yaml and stage
scripts, and a params.yaml switched to the simulated model and a small pool. The workspace's own
params.yaml, dvc.lock, pools and metrics are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import yaml

from tracevote.core.errors import DataError

BUILTIN_DATA = Path(__file__).parents[1] / "datasets" / "data"
BUILTIN_PROBLEMS = BUILTIN_DATA / "demo_problems.jsonl"
BUILTIN_STEPS = BUILTIN_DATA / "demo_steps.jsonl"  # ProcessBench's layout, hand-written
BUILTIN_DELTABENCH = BUILTIN_DATA / "demo_deltabench.csv"  # DeltaBench's CSV layout, hand-written
BUILTIN_GSM8K = BUILTIN_DATA / "demo_gsm8k.jsonl"  # GSM8K's layout (worked solution, #### N), hand-written
BUILTIN_PREDICTIONS = BUILTIN_DATA / "demo_predictions.jsonl"  # hand-written predictions for it, to grade
DEMO_PREDICTIONS = Path("predictions") / "demo_gsm8k.jsonl"  # where the scratch project keeps them
PIPELINE_FILES = ("dvc.yaml", ".dvcignore", ".gitignore")  # .gitignore: ledger folders are never committed
DEMO_POOL = 64


def demo_name(problems: Path) -> str:
    """"demo", or demo_<the file's stem> with anything but letters, digits, '_', '-' as '_' (a dataset's name)."""
    return "demo" if problems == BUILTIN_PROBLEMS else "demo_" + re.sub(r"[^A-Za-z0-9_-]", "_", problems.stem)[:59]


def results_by_method(name: str) -> dict[str, list[Path]]:
    """The demo's main outputs (dvc.yaml's paths for the dataset `name`), by method, relative to its project."""
    deepconf_metrics, deepconf_plots = Path("metrics", "deepconf", name), Path("plots", "deepconf", name)
    return {
        "DeepConf": [deepconf_metrics / "report.txt", deepconf_metrics / "summary.json",
                     deepconf_metrics / "online.md", deepconf_plots / "accuracy_vs_k.png",
                     deepconf_plots / "confidence.png"],
        "Debate, and voting beside it": [Path("metrics", "debate.md"), Path("metrics", "compare", "compare.md"),
                                         Path("plots", "accuracy_vs_tokens.png")],
        "Critique": [Path("metrics", "critique.md"), Path("plots", "critique", "critique.png")],
        "Grading": [Path("metrics", "grading.md"), Path("plots", "grading", "word_counts.png")],
    }


def results_listing(scratch: Path, name: str, here: Path) -> str:
    """The demo's closing lines: its main outputs, one per line, grouped by method, relative to `here`.

    >>> print(results_listing(Path("/repo/demo"), "demo", Path("/repo")).splitlines()[2])
        demo/metrics/deepconf/demo/report.txt
    """
    lines = ["demo: done. Its results, by method:"]
    for method, paths in results_by_method(name).items():
        lines += [f"  {method}", *(f"    {os.path.relpath(scratch / path, here)}" for path in paths)]
    return "\n".join(lines)


def demo_overrides(problems: Path, *, problem_key: str) -> dict[str, Any]:
    """params.yaml changes for the demo: one local dataset for every method, simulated model, small pool,
    shorter traces."""
    ks = [1, 2, 4, 8, 16, 32, DEMO_POOL]
    name = demo_name(problems)
    return {
        "datasets": {name: local_dataset(problems, problem_key=problem_key), **demo_step_datasets(),
                     "demo_gsm8k": local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")},
        "deepconf": {"datasets": [name]},
        "debate": {"datasets": [name], "contest_halves": []},
        "critique": {"datasets": list(demo_step_datasets())},
        "grading": {"runs": demo_grading_runs(name), "critic": {"enabled": True}},
        "model": {"backend": "sim", "sim": {"mean_tokens": 1200}},
        "pool": {"n_pool": DEMO_POOL},
        "confidence": {"group_size": 256, "tail_tokens": 256},
        "eval": {"k": ks, "repeat": 32},
        "report": {"k": DEMO_POOL},
    }


def local_dataset(path: Path, *, problem_key: str = "problem", answer_format: str = "aime") -> dict[str, Any]:
    """A `datasets:` entry reading problems from a local file."""
    return {"source": {"hf_dataset": None, "hf_config": "default", "hf_split": "train",
                       "api_url": "https://datasets-server.huggingface.co", "path": str(path.resolve())},
            "kind": "problems", "problem_key": problem_key, "answer_key": "answer", "id_key": None,
            "answer_format": answer_format}


def local_steps_dataset(path: Path, *, steps_format: str = "processbench") -> dict[str, Any]:
    """A `datasets:` entry reading step-labelled solutions from a local file."""
    return {**local_dataset(path), "kind": "steps", "steps_format": steps_format, "answer_key": "label",
            "id_key": "id", "answer_format": "integer"}


def demo_step_datasets() -> dict[str, dict[str, Any]]:
    """The critique's demo datasets: a ProcessBench-style file and a DeltaBench-style CSV, both hand-written."""
    return {"demo_steps": local_steps_dataset(BUILTIN_STEPS),
            "demo_deltabench": local_steps_dataset(BUILTIN_DELTABENCH, steps_format="deltabench")}


def demo_grading_runs(pool_dataset: str) -> dict[str, dict[str, Any]]:
    """Grade the demo pool (every simulated trace a prediction) and the hand-written predictions file."""
    return {f"pool_{pool_dataset}": {"dataset": pool_dataset, "predictions": f"pools/{pool_dataset}.json"},
            "demo_handwritten": {"dataset": "demo_gsm8k", "predictions": str(DEMO_PREDICTIONS)}}


def guess_problem_key(problems: Path) -> str:
    """"problem", or "question" for files that use it (the shared AIME files do)."""
    if not problems.is_file():
        raise DataError(f"{problems}: demo dataset not found")
    first = orjson.loads(problems.read_bytes().splitlines()[0])
    return "question" if "problem" not in first and "question" in first else "problem"


def prepare(repo: Path, scratch: Path, problems: Path) -> None:
    """A fresh scratch project: the pipeline files, the stage scripts and demo params."""
    if scratch.exists():
        shutil.rmtree(scratch)
    copy_pipeline(repo, scratch, repo / "params.yaml",
                  demo_overrides(problems, problem_key=guess_problem_key(problems)))
    (scratch / DEMO_PREDICTIONS).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUILTIN_PREDICTIONS, scratch / DEMO_PREDICTIONS)


def copy_pipeline(repo: Path, dest: Path, params_source: Path, overrides: dict[str, Any]) -> None:
    """dvc.yaml, the stage scripts and the library sources they depend on, and `params_source` with overrides
    as dest/params.yaml (the demo starts from the user's params.yaml, the tests from their own fixture)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PIPELINE_FILES:
        shutil.copy(repo / name, dest / name)
    shutil.copytree(repo / "stages", dest / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(repo / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    params = yaml.safe_load(params_source.read_text(encoding="utf-8"))
    write_params(dest / "params.yaml", with_overrides(params, overrides))


def with_overrides(params: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`params` deep-merged with `overrides`, except that a `datasets` or `grading.runs` map in the overrides
    replaces the whole map (a copy fetches and grades only what it names)."""
    merged = deep_merge(params, overrides)
    if "datasets" in overrides:
        merged["datasets"] = overrides["datasets"]
    runs = overrides.get("grading", {}).get("runs")
    if runs is not None:
        merged["grading"] = {**merged["grading"], "runs": runs}
    return merged


def write_params(path: Path, params: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True), encoding="utf-8")


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """{"a": {"b": 1, "c": 2}} merged with {"a": {"c": 3}} -> {"a": {"b": 1, "c": 3}}."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and value and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
