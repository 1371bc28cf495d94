"""`make demo`: the whole pipeline on the simulated model, in a scratch DVC project.

The scratch copy (`demo/`, ignored by git and DVC) gets this repository's dvc.yaml and stage
scripts, and a params.yaml switched to the simulated model and a small pool. The workspace's own
params.yaml, dvc.lock, pools and metrics are never touched. `make try DATA=<folder>` (`demo --data`) is the
same at the same sizes, on the datasets of the workspace's params.yaml read from that folder's files.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from tracevote.cli.demo_params import deep_merge, set_aside_overrides
from tracevote.core.config_datasets import DATASET_NAME, KEY_NAME_RULE
from tracevote.core.errors import DataError
from tracevote.core.params_yaml import read_params_yaml
from tracevote.datasets.local import read_local_rows

BUILTIN_DATA = Path(__file__).parents[1] / "datasets" / "data"
BUILTIN_PROBLEMS = BUILTIN_DATA / "demo_problems.jsonl"
BUILTIN_STEPS = BUILTIN_DATA / "demo_steps.jsonl"  # ProcessBench's layout, hand-written
BUILTIN_DELTABENCH = BUILTIN_DATA / "demo_deltabench.csv"  # DeltaBench's CSV layout, hand-written
BUILTIN_GSM8K = BUILTIN_DATA / "demo_gsm8k.jsonl"  # GSM8K's layout (worked solution, #### N), hand-written
BUILTIN_PREDICTIONS = BUILTIN_DATA / "demo_predictions.jsonl"  # hand-written predictions for it, to grade
DEMO_PREDICTIONS = Path("predictions") / "demo_gsm8k.jsonl"  # where the scratch project keeps them
PIPELINE_FILES = ("dvc.yaml", ".dvcignore", ".gitignore")  # .gitignore: ledger folders are never committed
DEMO_POOL = 64
# The simulated build's server and client share one process and its GIL, so requests in flight beyond 2 only add
# switching: 8 cost ~1.9 CPU s more than 2 on the demo's build_pool (median of 5), and wall time (docs/simulator.md)
DEMO_CONCURRENCY = 2
LOCK_NAME = ".demo.lock"  # inside the scratch project, which git and DVC ignore
# demo/methods/<method>/: the scratch project of a run of one method (`make try METHOD=...`), kept beside the other
# methods' when any run starts again; DVC ignores a project inside another (a subrepo), so demo/'s run never sees it
METHOD_RUNS = "methods"
LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")  # the local files fetch reads (tracevote.datasets.local)
# the stage that runs a method and everything it needs; online (a live run) is make real's alone
METHOD_TARGETS = {"deepconf": "report", "debate": "score_debate", "critique": "report_critiques",
                  "grading": "report_grading", "online": "score_online"}


def demo_name(problems: Path) -> str:
    """"demo", or demo_<the file's stem> with anything but letters, digits, '_', '-' as '_' (a dataset's name)."""
    return "demo" if problems == BUILTIN_PROBLEMS else "demo_" + re.sub(r"[^A-Za-z0-9_-]", "_", problems.stem)[:59]


def results_by_method(name: str, *, live: bool = False) -> dict[str, list[Path]]:
    """The demo's main outputs (dvc.yaml's paths for the dataset `name`), by method, relative to its project; with
    `live`, a live online run's too (`make real` runs one)."""
    deepconf_metrics, deepconf_plots = Path("metrics", "deepconf", name), Path("plots", "deepconf", name)
    live_results = {"Live online DeepConf": [Path("metrics", "online_live", name, "live.md"),
                                             Path("plots", "online_live", name, "accuracy_vs_tokens.png")]}
    return {**({} if not live else live_results), **{
        "DeepConf": [deepconf_metrics / "report.txt", deepconf_metrics / "summary.json",
                     deepconf_metrics / "online.md", deepconf_plots / "accuracy_vs_k.png",
                     deepconf_plots / "confidence.png"],
        "Debate, and voting beside it": [Path("metrics", "debate.md"), Path("metrics", "compare", "compare.md"),
                                         Path("plots", "accuracy_vs_tokens.png")],
        "Critique": [Path("metrics", "critique.md"), Path("plots", "critique", "critique.png")],
        "Grading": [Path("metrics", "grading.md"), Path("plots", "grading", "word_counts.png")],
    }}


METHOD_TITLES = {"deepconf": "DeepConf", "debate": "Debate, and voting beside it", "critique": "Critique",
                 "grading": "Grading", "online": "Live online DeepConf"}  # results_by_method's groups, by key


def results_listing(scratch: Path, name: str, here: Path, *, label: str = "demo", method: str | None = None,
                    live: bool = False) -> str:
    """The closing lines of `make demo` (or `make real`: `label`): the main outputs of every method (or of
    `method`), one per line, grouped by method, relative to `here`.

    >>> print(results_listing(Path("/repo/demo"), "demo", Path("/repo")).splitlines()[2])
        demo/metrics/deepconf/demo/report.txt
    """
    lines = [f"{label}: done. Its results, by method:"]
    for title, paths in results_by_method(name, live=live).items():
        if method is None or METHOD_TITLES[method] == title:
            lines += [f"  {title}", *(f"    {os.path.relpath(scratch / path, here)}" for path in paths)]
    return "\n".join(lines)


def run_dvc(scratch: Path, commands: list[list[str]], label: str) -> int:
    """Each `dvc` command in the scratch project with this venv's python first on PATH (DVC's stages run
    `python ...`); 0, or the first failure's exit code, said in one line."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in commands:
        completed = subprocess.run([sys.executable, "-m", "dvc", *command], cwd=scratch, env=env, check=False)
        if completed.returncode != 0:
            print(f"{label}: `dvc {' '.join(command)}` failed in {scratch}", file=sys.stderr)
            return completed.returncode
    return 0


def demo_overrides(problems: Path, *, problem_key: str) -> dict[str, Any]:
    """params.yaml changes for the demo: one local dataset for every method, simulated model, small pool,
    shorter traces."""
    name = demo_name(problems)
    return {
        "datasets": {name: local_dataset(problems, problem_key=problem_key), **demo_step_datasets(),
                     "demo_gsm8k": local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")},
        "deepconf": {"datasets": [name]},
        "debate": {"datasets": [name], "contest_halves": []},
        "critique": {"datasets": list(demo_step_datasets())},
        "grading": {"runs": demo_grading_runs(name), "critic": {"enabled": True}},
        **small_scale(),
    }


def small_scale() -> dict[str, Any]:
    """The demo's sizes: the simulated model, a pool of 64 per problem built 2 requests at a time, shorter traces and
    windows."""
    return {
        "model": {"backend": "sim", "sim": {"mean_tokens": 1200}},
        "pool": {"n_pool": DEMO_POOL, "concurrency": DEMO_CONCURRENCY},
        "confidence": {"group_size": 256, "tail_tokens": 256},
        "eval": {"k": [1, 2, 4, 8, 16, 32, DEMO_POOL], "repeat": 32},
        "report": {"k": DEMO_POOL},
    }


def local_dataset(path: Path, *, problem_key: str = "problem", answer_format: str = "aime") -> dict[str, Any]:
    """A `datasets:` entry reading problems from a local file."""
    return {"source": {"hf_dataset": None, "hf_config": "default", "hf_split": "train",
                       "api_url": "https://datasets-server.huggingface.co", "path": str(path.resolve()),
                       "watch": str(path.resolve())},
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
    return {**pool_grading_run(pool_dataset),
            "demo_handwritten": {"dataset": "demo_gsm8k", "predictions": str(DEMO_PREDICTIONS)}}


def pool_grading_run(dataset: str) -> dict[str, dict[str, Any]]:
    """A grading run whose predictions are the traces of `dataset`'s pool."""
    return {f"pool_{dataset}": {"dataset": dataset, "predictions": f"pools/{dataset}.json"}}


def guess_problem_key(problems: Path) -> str:
    """"problem", or "question" for files that use it (the shared AIME files do); the file is any that fetch reads
    (a .json list as well as JSON lines)."""
    if not problems.is_file():
        raise DataError(f"{problems}: demo dataset not found")
    rows = read_local_rows(problems)
    first = rows[0] if rows else {}
    return "question" if "problem" not in first and "question" in first else "problem"


def prepare(repo: Path, scratch: Path, problems: Path, *, data: Path | None = None) -> LocalPlan:
    """A fresh scratch project: the pipeline files, the stage scripts and demo params; with `data`, the datasets
    of the workspace's params.yaml read from that folder's files (see local_overrides)."""
    params = read_params_yaml(repo / "params.yaml")  # a syntax error: one line with its line and column
    if data is None:
        plan = LocalPlan(deepconf_dataset=demo_name(problems), sources={}, fallbacks=[])
        overrides = demo_overrides(problems, problem_key=guess_problem_key(problems))
    else:
        plan, overrides = local_overrides(params, data)
    set_aside, emptied = set_aside_overrides(params)  # a live run, a study
    plan = replace(plan, set_aside=set_aside)
    overrides = deep_merge(overrides, emptied)
    clear_scratch(scratch)
    copy_pipeline(repo, scratch, repo / "params.yaml", overrides)
    (scratch / DEMO_PREDICTIONS).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUILTIN_PREDICTIONS, scratch / DEMO_PREDICTIONS)
    return plan


def scratch_for(repo: Path, method: str | None) -> Path:
    """demo/ for every method; demo/methods/<method>/ for one, so each method's last results stay side by side."""
    return repo / "demo" if method is None else repo / "demo" / METHOD_RUNS / method


def clear_scratch(scratch: Path) -> None:
    """Everything in the scratch project but its lock (held by this run) and the one-method runs inside it."""
    if not scratch.exists():
        return
    for entry in scratch.iterdir():
        if entry.name in (LOCK_NAME, METHOD_RUNS):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@contextmanager
def scratch_lock(scratch: Path) -> Iterator[None]:
    """Hold the scratch project for this run: a second `make demo` or `make try` in the same folder is refused in
    one line instead of deleting the project under the first. An flock, so a killed run leaves no stale lock."""
    scratch.mkdir(parents=True, exist_ok=True)
    lock = scratch / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise DataError(f"{scratch}: another `make demo` or `make try` (process {holder}) is running in it; wait "
                            f"for it to end (its lock: {lock})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def repro_targets(method: str | None) -> list[str]:
    """What `dvc repro` runs for one method (every stage when None): deepconf -> ["report"], ..."""
    return [] if method is None else [METHOD_TARGETS[method]]


@dataclass(frozen=True)
class LocalPlan:
    """Which dataset DeepConf reports on, which file each dataset is read from, and the methods that found
    none of their datasets and run on the built-in demo files instead."""

    deepconf_dataset: str
    sources: dict[str, Path]
    fallbacks: list[str]
    set_aside: list[str] = field(default_factory=list)  # "study.datasets [aime_2025]": lists emptied in the copy


def local_overrides(params: dict[str, Any], data: Path) -> tuple[LocalPlan, dict[str, Any]]:
    """The demo's sizes, with every dataset of `params` that `data` holds a file for (find_local_file) read from
    it; each method runs on its own datasets that were found, a method with none on the built-in demo files."""
    if not data.is_dir():
        raise DataError(f"{data}: not a folder (DATA= names a folder of dataset files, e.g. ../shared/data)")
    sources = {name: path for name in params["datasets"] if (path := find_local_file(data, name)) is not None}
    if not sources:
        raise DataError(f"{data}: holds no file for any dataset of params.yaml: looked for <name> or "
                        f"<name>_test with {', '.join(LOCAL_SUFFIXES)}, for {', '.join(params['datasets'])}")
    datasets = {name: local_recipe(params["datasets"][name], path) for name, path in sources.items()}
    fallbacks: list[str] = []

    def found(method: str, names: list[str], builtin: dict[str, dict[str, Any]]) -> list[str]:
        kept = [name for name in names if name in sources]
        if kept:
            return kept
        fallbacks.append(method)
        datasets.update(builtin)
        return list(builtin)

    builtin_problems = {"demo": local_dataset(BUILTIN_PROBLEMS)}
    deepconf = found("deepconf", params["deepconf"]["datasets"], builtin_problems)
    debate = found("debate", params["debate"]["datasets"], builtin_problems)
    critique = found("critique", params["critique"]["datasets"], demo_step_datasets())
    runs = {name: run for name, run in params["grading"]["runs"].items()
            if run["dataset"] in deepconf and run["predictions"] == f"pools/{run['dataset']}.json"}
    halves = [name for name in params["debate"]["contest_halves"] if name in debate]
    overrides = {"datasets": datasets, "deepconf": {"datasets": deepconf},
                 "debate": {"datasets": debate, "contest_halves": halves},
                 "critique": {"datasets": critique},
                 "grading": {"runs": runs or pool_grading_run(deepconf[0])}, **small_scale()}
    return LocalPlan(deepconf_dataset=deepconf[0], sources=sources, fallbacks=fallbacks), overrides


def find_local_file(data: Path, name: str) -> Path | None:
    """data/<name>.<suffix>, else data/<name>_test.<suffix>, the first suffix of LOCAL_SUFFIXES found:
    aime_2025 -> aime_2025.jsonl, gsm8k -> gsm8k_test.jsonl, processbench_gsm8k -> processbench_gsm8k.json."""
    if not DATASET_NAME.match(str(name)):  # a key of the unchecked params.yaml: never a path, "../x" say
        raise DataError(f"datasets: {name!r} is not a dataset name ({KEY_NAME_RULE}); check_params refuses it too")
    for stem in (name, f"{name}_test"):
        for suffix in LOCAL_SUFFIXES:
            if (data / f"{stem}{suffix}").is_file():
                return data / f"{stem}{suffix}"
    return None


def local_recipe(recipe: dict[str, Any], path: Path) -> dict[str, Any]:
    """`recipe` reading `path`; a dataset of problems whose first row lacks the recipe's problem key but has
    "problem" or "question" reads that field (the shared AIME files say "question" where the hub's say "problem")."""
    entry = {**recipe, "source": {**recipe["source"], "hf_dataset": None, "path": str(path.resolve()),
                                  "watch": str(path.resolve())}}
    return {**entry, "problem_key": local_problem_key(recipe, path)}


def local_problem_key(recipe: dict[str, Any], path: Path) -> str:
    """The recipe's problem_key, or for a dataset of problems whose file's first row lacks it, "problem" or
    "question", whichever the row has."""
    if recipe["kind"] != "problems":
        return recipe["problem_key"]
    rows = read_local_rows(path)
    first = rows[0] if rows else {}
    if recipe["problem_key"] in first:
        return recipe["problem_key"]
    return next((key for key in ("problem", "question") if key in first), recipe["problem_key"])


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

