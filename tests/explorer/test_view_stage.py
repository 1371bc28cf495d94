"""The DVC stage `view`, as dvc.yaml declares it, in a small project: it builds the site reading exactly the params it
declares, is up to date after, rebuilds when a pool's score table changes, and a failed rebuild keeps the last site
(persist)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench.explorer_project import write_project
from tests.conftest import REPO_ROOT
from tests.dvcproject import dvc, init_repos, project_env, run
from tests.dvcstatus import modified_params
from tests.test_docs_commands import dotted_leaves
from tracevote.core.entry import PARAMS_READS_ENV
from tracevote.core.parquet import read_parquet_metadata, write_parquet
from tracevote.core.stage_params import declaration_problems, every_stage_params
from tracevote.explorer.sitefiles import read_data

pytestmark = pytest.mark.slow


def _project(root: Path) -> Path:
    """The toy project in a git repo with DVC, the repository's `view` stage alone in its dvc.yaml."""
    write_project(root)
    for folder in ("debates", "critiques", "grading", "metrics/compare"):  # the other methods' folders, as yet empty
        (root / folder).mkdir(parents=True)
    stage = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]["view"]
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"view": stage}}, sort_keys=False))
    shutil.copytree(REPO_ROOT / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO_ROOT / ".gitignore", root / ".gitignore")
    init_repos(root)
    run(root, "git", "add", "-A")
    run(root, "git", "commit", "-qm", "project")
    return root


def _changed_stages(root: Path) -> list[str]:
    return sorted(json.loads(dvc(root, "status", "--json").stdout))


def test_the_view_stage_rebuilds_when_a_pool_changes(tmp_path: Path) -> None:
    root = _project(tmp_path / "project")
    reads = tmp_path / "reads"
    dvc(root, "repro", "view", env=project_env({PARAMS_READS_ENV: str(reads)}))
    assert read_data(root / "explorer", "index")["sections"][0]["view"] == "pool"
    read = json.loads((reads / "view.json").read_text())["reads"]
    leaves = dotted_leaves(yaml.safe_load((root / "params.yaml").read_text()))
    problems = declaration_problems("view", read, every_stage_params(root)["view"], leaves)
    # pools only here: the debate's and critique's keys are read where they ran (test_docs_commands checks both ways
    # on the README's whole pipeline)
    assert [problem for problem in problems if not problem.endswith("which it never read")] == []
    assert _changed_stages(root) == []
    assert run(root, "git", "status", "--porcelain", "--ignored", "explorer").stdout.startswith("!! explorer")
    committed = (root / "params.yaml").read_text()
    params = yaml.safe_load(committed)
    params["view"].update(trace_pages=4, trace_pages_by="tail")  # which traces get a page: a rebuild
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    # both keys in one `dvc status`, which names each as a modified param of view: either alone flags it
    status = json.loads(dvc(root, "status", "--json").stdout)
    assert sorted(status) == ["view"]
    assert modified_params(status["view"]) == {"view.trace_pages", "view.trace_pages_by"}, status
    (root / "params.yaml").write_text(committed)

    scores = root / "data" / "scores" / "bench.parquet"
    table = pd.read_parquet(scores)
    first = table.index[table["problem_id"] == "synth-00"][0]
    table.loc[first, "n_tokens"] = 12345
    write_parquet(scores, (rows for _, rows in table.groupby("problem_id", sort=False)),
                  read_parquet_metadata(scores))
    # the project's one stage reruns (no --force): the changed table made it stale, as `dvc status` would say
    assert "Running stage 'view'" in dvc(root, "repro", "view").stdout
    assert read_data(root / "explorer", "pool0/p0")["traces"]["n_tokens"][0] == 12345

    (root / "data" / "aggregate" / "bench.json").unlink()
    failed = dvc(root, "repro", "view", check=False)
    assert failed.returncode != 0
    assert "data/aggregate/bench.json: no aggregate" in failed.stderr
    assert read_data(root / "explorer", "pool0/p0")["traces"]["n_tokens"][0] == 12345  # the last good site
