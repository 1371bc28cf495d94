"""`dvc exp run` on the pipeline: an experiment beside its baseline, on the DeepConf branch alone (with no target, on
a project where every stage has run: tests/test_pipeline_param_changes.py, on its copy of the project
tests/test_pipeline.py builds once per run); `dvc metrics show` while one method has run (a file and a DeepConf-only
project of its own, so that the suite's workers share the pipeline tests' time)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO_ROOT
from tests.dvcproject import dvc, make_project, run
from tests.test_pipeline import ran_stages, small_sim_params

pytestmark = pytest.mark.slow
DEEPCONF = "report"  # every dataset's report, with what it needs: fetch, normalize, build_pool, score, aggregate


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed project in which `dvc repro report` ran the DeepConf branch once, and nothing else."""
    project = make_project(tmp_path_factory.mktemp("experiments") / "project", small_sim_params())
    result = dvc(project, "repro", DEEPCONF)
    assert ran_stages(result.stdout) == {"fetch", "normalize", "build_pool", "score", "aggregate", "report"}
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "baseline")
    return project


def test_metrics_show_lists_the_one_method_that_ran_without_a_warning(built: Path) -> None:
    result = dvc(built, "metrics", "show")
    assert "failed to load" not in (result.stdout + result.stderr).lower()
    rows = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    # a row per method the report ranks, offline and online (the fixture's one eta: top-10% only), and pass@K, avg@K
    methods = ["avg", "avg_at_k", "avg_top10", "avg_top90", "bottom10", "bottom10_top10", "bottom10_top90", "cons",
               "lowest", "lowest_top10", "lowest_top90", "online_high", "online_low", "pass1", "pass_at_k", "tail",
               "tail_top10", "tail_top90"]
    assert rows == [f"metrics/headline/deepconf/toy/{name}.json" for name in methods]
    header = result.stdout.splitlines()[0].split()
    assert header == ["Path", "accuracy_pct", "ci_high_pct", "ci_low_pct", "k", "problems", "saved_pct", "simulated",
                      "tokens_per_problem"]
    # report.k is the pool (16): pass@16 is the share of problems with a correct sample, avg@16 the share of correct
    scores = pd.read_parquet(built / "data/scores/toy.parquet")
    correct = scores.groupby("problem_id")["correct"]
    shown = {name: json.loads((built / f"metrics/headline/deepconf/toy/{name}.json").read_text())
             for name in ("pass_at_k", "avg_at_k")}
    assert shown["pass_at_k"]["k"] == 16 and shown["pass_at_k"]["accuracy_pct"] == round(100 * correct.any().mean(), 2)
    assert shown["avg_at_k"]["accuracy_pct"] == round(100 * correct.mean().mean(), 2)


EXPERIMENTS_DOC = REPO_ROOT / "docs" / "experiments.md"


def doc_block(starting: str) -> str:
    """The fenced block of docs/experiments.md whose first line starts with `starting`."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", EXPERIMENTS_DOC.read_text(), re.DOTALL)
    return next(block for block in blocks if block.startswith(starting))


def test_exp_run_with_a_confidence_setting_shows_in_exp_show_and_moves_the_weighted_and_filtered_rows_of_metrics_diff(
        built: Path) -> None:
    # on the module's project itself (test_metrics_show_lists_... reads only what no confidence setting changes),
    # and one experiment for exp show, metrics diff and the docs' commands alike
    project = built
    # the foreach group as the target: the DeepConf branch of every dataset, and no other method's stage
    result = dvc(project, "exp", "run", "-S", "confidence.group_size=8", "-S", "confidence.tail_tokens=8",
                 DEEPCONF)
    assert ran_stages(result.stdout) == {"score", "aggregate", "report"}

    printed = dvc(project, "metrics", "diff").stdout  # a line per metric that moved: path, metric, HEAD, workspace
    moved: dict[str, set[str]] = {}
    for line in printed.splitlines()[1:]:
        path, metric = line.split()[:2]
        moved.setdefault(Path(path).stem, set()).add(metric)
    voting = {method for method in moved if not method.startswith("online_")}
    measures = ("avg", "bottom10", "lowest", "tail")
    weighted_or_filtered = {f"{measure}{top}" for measure in measures for top in ("", "_top10", "_top90")}
    assert voting and voting <= weighted_or_filtered  # never pass1 or cons, which read no confidence
    assert all("accuracy_pct" in change or change <= {"ci_low_pct", "ci_high_pct"} for change in moved.values())
    assert printed.splitlines()[0].split() == ["Path", "Metric", "HEAD", "workspace", "Change"]
    assert {f"metrics/headline/deepconf/toy/{method}.json" for method in voting} <= {
        line.split()[0] for line in printed.splitlines()[1:]}
    # what docs/experiments.md shows (in the order of DVC's walk of the folder, which may vary)
    assert sorted(line.split() for line in printed.splitlines()) == sorted(
        line.split() for line in doc_block("Path ").splitlines())

    # docs/experiments.md's commands, as written (its dataset is aime_2025, this project's toy), print what it shows
    commands = doc_block("NOISE=").replace("aime_2025", "toy")
    shown = run(project, "bash", "-euo", "pipefail", "-c", commands).stdout.splitlines()
    documented = doc_block("| Experiment").splitlines()
    table = [line for line in shown if line.startswith("|")]
    assert table[:3] == documented[:3]  # the same columns (metrics beside the params), and the workspace's figures
    assert table[3].split("|")[2:] == documented[3].split("|")[2:]  # the baseline's (on master, or main)
    changed = next(line for line in shown if line.lstrip().startswith("Experiment") and "accuracy_pct" in line)
    assert "Created" not in changed and "ci_low_pct" not in changed and "group_size" in changed
    # the last (`dvc exp show --csv`, everything): the experiment beside the baseline, with its headline metrics
    with (project / "experiments.csv").open(newline="", encoding="utf-8") as file:
        exported = list(csv.DictReader(file))
    assert sorted(row["confidence.group_size"] for row in exported) == ["32", "8", "8"]  # workspace, baseline, exp
    for metric in ("accuracy_pct", "tokens_per_problem"):
        column = f"metrics/headline/deepconf/toy/tail_top10.json:{metric}"
        assert all(row[column] for row in exported), (column, exported)
