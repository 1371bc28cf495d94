"""Ledger folders never reach git (issue 22 item 6): the repository's own .gitignore ignores pools/*/, debates/*/,
critiques/*/ and grading/critic/*/, so when a later stage of the same `dvc repro` fails (before DVC writes its
.gitignore entries), `git add -A` still stages no ledger file, and DVC tracks the ledgers as before."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.dvcproject import dvc, make_project, run
from tests.test_pipeline import small_sim_params

pytestmark = pytest.mark.slow

LEDGER_DIRS = ("pools/toy", "debates/toy", "critiques/toy_steps", "grading/critic/pool_toy")


def is_ledger(path: str) -> bool:
    return any(path.startswith(folder + "/") for folder in LEDGER_DIRS) or path.startswith("grading/critic/")


@pytest.mark.parametrize(("path", "ignored"), [
    ("pools/aime_2025/deepseek-v4-flash-0123abcd/samples/aime_2025-01.tvf", True),
    ("pools/aime_2025.json", False),  # a manifest: committed
    ("study/qwen-local/pools/aime_2025/qwen-0123abcd/samples/aime_2025-01.tvf", True),  # deepconf.endpoints'
    ("study/qwen-local/pools/aime_2025.json", False),
    ("debates/aime_2025/log.tvf", True),
    ("debates/aime_2025.json", False),
    ("critiques/processbench_gsm8k/log.tvf", True),
    ("critiques/processbench_gsm8k.json", False),
    ("grading/critic/pool_aime/manifest.json", True),
    ("grading/critic/cli/log.tvf", True),  # `python -m tracevote grade --enable-critic`'s default ledger
    ("grading/runs/pool_aime.json", False),
])
def test_the_repository_ignores_ledger_folders_but_not_manifests(path: str, ignored: bool) -> None:
    checked = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=REPO_ROOT, check=False)
    assert checked.returncode == (0 if ignored else 1)


# The paid stages, each storing its calls in a ledger folder of its own, and grade@pool_toy, which needs two of them:
# what the claim is about, without the scoring and reports that only read the ledgers. DVC orders several targets'
# stages as it likes, so the failing run keeps going past grade's failure: every paid stage runs whatever the order,
# and the run still fails as a whole.
PAID_THEN_GRADE = ("build_pool@toy", "build_debate@toy", "build_critiques@toy_steps", "grade@pool_toy")


def test_a_later_stage_failing_leaves_no_ledger_file_for_git(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", small_sim_params())
    # a file where grade writes its folder: grade@pool_toy, which needs the pool and the critic's ledger, fails
    # after every paid stage it depends on has stored its calls
    (project / "grading").mkdir()
    (project / "grading" / "runs").write_text("in the way\n")
    failed = dvc(project, "repro", "--keep-going", *PAID_THEN_GRADE, check=False)
    assert failed.returncode != 0
    assert "grade@pool_toy" in failed.stdout + failed.stderr
    for folder in LEDGER_DIRS:  # every ledger was written before the failure
        assert (project / folder).is_dir(), folder
    run(project, "git", "add", "-A")
    staged = run(project, "git", "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    assert "A  pools/toy.json" in staged  # the manifest is committed as before
    assert [line for line in staged if is_ledger(line[3:])] == []
    run(project, "git", "commit", "-qm", "after a failed run")
    assert [path for path in run(project, "git", "ls-files").stdout.splitlines() if is_ledger(path)] == []
    # DVC still tracks them: once the obstacle is gone the run completes and leaves nothing changed
    (project / "grading" / "runs").unlink()
    dvc(project, "repro", *PAID_THEN_GRADE)
    status = dvc(project, "status", *PAID_THEN_GRADE)
    assert "Data and pipelines are up to date" in status.stdout, status.stdout + status.stderr
    assert "ignored" not in status.stdout + status.stderr
    run(project, "git", "add", "-A")
    assert [path for path in run(project, "git", "ls-files").stdout.splitlines() if is_ledger(path)] == []
