"""Issue 29: a user's own input is never a pipeline output, and editing a local source marks fetch stale, in real
DVC projects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import dvc, make_project, one_dataset, project_env, run, run_stage, update_params
from tracevote.core.inputs import Output, clashes, inside_a_dvc_project
from tracevote.datasets.problems import load_problems

pytestmark = pytest.mark.slow


def write_rows(path: Path, count: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"problem": f"Compute {i}+1.", "answer": str(i + 1)}) + "\n"
                            for i in range(count)))
    return path


def test_a_source_that_normalize_writes_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """DeepConf's write-up suggests `data/aime_2025.jsonl`, which normalize@aime_2025 writes: check_params and
    fetch refuse it in one line naming both and a place for it, and the user's file is never written over."""
    project = make_project(tmp_path / "project", one_dataset("aime_2025", write_rows(tmp_path / "a.jsonl", 2)))
    own = write_rows(project / "data" / "aime_2025.jsonl", 5).read_bytes()
    update_params(project, {"datasets": {"aime_2025": {"source": {"path": "data/aime_2025.jsonl"}}}})
    expected = ("params.yaml: datasets.aime_2025.source.path: data/aime_2025.jsonl is an output of "
                "normalize@aime_2025, which a run would write over your file; keep it outside the pipeline's "
                "outputs, e.g. move it to inputs/aime_2025.jsonl and set source.path and source.watch to "
                "inputs/aime_2025.jsonl")

    checked = run_stage(project, "check_params.py", check=False)
    assert checked.returncode == 2
    assert checked.stderr.startswith(f"error: {expected}\n")
    assert "datasets.aime_2025.source.watch:" in checked.stderr  # the file's other problems follow
    failed = dvc(project, "repro", "normalize@aime_2025", check=False)
    assert failed.returncode != 0 and f"error: {expected}" in failed.stdout + failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr
    assert (project / "data" / "aime_2025.jsonl").read_bytes() == own


def test_a_source_dvc_tracks_with_dvc_add_is_refused(tmp_path: Path) -> None:
    """Any path DVC tracks as an output counts: a .dvc file's too (dvc checkout and pull replace it)."""
    project = make_project(tmp_path / "project", one_dataset("toy", write_rows(tmp_path / "a.jsonl", 2)))
    write_rows(project / "mine" / "toy.jsonl", 2)
    dvc(project, "add", "mine/toy.jsonl")
    update_params(project, {"datasets": {"toy": {"source": {"path": "mine/toy.jsonl", "watch": "mine/toy.jsonl"}}}})
    checked = run_stage(project, "check_params.py", check=False)
    assert checked.returncode == 2
    assert checked.stderr == ("error: params.yaml: datasets.toy.source.path: mine/toy.jsonl is an output of "
                              "mine/toy.jsonl.dvc, whose checkout and pull would replace your file; keep it outside "
                              "the pipeline's outputs, e.g. move it to inputs/toy.jsonl and set source.path and "
                              "source.watch to inputs/toy.jsonl\n")


@pytest.mark.parametrize(("source", "says"), [
    ("data/raw/toy.jsonl", "data/raw/toy.jsonl is an output of fetch@toy"),
    ("pools/toy/mine.jsonl", "pools/toy/mine.jsonl lies inside pools/toy, an output of build_pool@toy"),
    ("data", "data holds data/raw/toy.jsonl, an output of fetch@toy"),
    ("inputs/toy.jsonl", None),
    ("mine/toy.jsonl", "mine/toy.jsonl is an output of mine/toy.jsonl.dvc, whose checkout and pull would replace "
                       "your file"),
    ("/elsewhere/toy.jsonl", None),
])
def test_a_source_is_refused_when_it_is_lies_inside_or_holds_an_output(tmp_path: Path, source: str,
                                                                        says: str | None) -> None:
    outputs = [Output(tmp_path / "data" / "raw" / "toy.jsonl", "fetch@toy"),
               Output(tmp_path / "data" / "toy.jsonl", "normalize@toy"),
               Output(tmp_path / "pools" / "toy", "build_pool@toy"),
               Output(tmp_path / "mine" / "toy.jsonl", "mine/toy.jsonl.dvc")]
    lines = clashes({"toy": source}, outputs, tmp_path)
    assert (lines[0].startswith(f"datasets.toy.source.path: {says}") if says else lines == [])


def test_editing_a_local_source_marks_fetch_stale(tmp_path: Path) -> None:
    """fetch@<name> depends on source.watch, the local file itself: an edit shows in `dvc status` and the next
    repro reads it (before issue 29 it took `dvc repro -f`)."""
    source = write_rows(tmp_path / "inputs" / "toy.jsonl", 3)
    project = make_project(tmp_path / "project", one_dataset("toy", source))
    dvc(project, "repro", "normalize@toy")
    assert dvc(project, "status", "fetch@toy").stdout.strip() == "Data and pipelines are up to date."

    write_rows(source, 4)
    status = dvc(project, "status", "fetch@toy").stdout
    assert "fetch@toy:" in status and f"modified:           {source}" in status
    rerun = dvc(project, "repro", "normalize@toy")
    assert "Running stage 'fetch@toy'" in rerun.stdout
    assert len(load_problems(project / "data" / "toy.jsonl")) == 4


def test_datasets_local_refuses_a_folder_of_outputs_and_writes_nothing(tmp_path: Path) -> None:
    """`datasets local data` would point aime_2025 at data/aime_2025.jsonl, which normalize writes."""
    project = make_project(tmp_path / "project", one_dataset("aime_2025", write_rows(tmp_path / "a.jsonl", 2)))
    write_rows(project / "data" / "aime_2025.jsonl", 2)
    write_rows(project / "data" / "aime_2025_steps.jsonl", 2)  # the critique's dataset in one_dataset's project
    before = (project / "params.yaml").read_bytes()
    refused = run(project, sys.executable, "-m", "tracevote", "datasets", "local", "data", check=False)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: params.yaml: datasets.aime_2025.source.path: data/aime_2025.jsonl is "
                                     "an output of normalize@aime_2025")
    assert (project / "params.yaml").read_bytes() == before


@pytest.mark.parametrize(("dvc_folder_at", "asked_at", "inside"), [
    (None, ".", False),  # a test's or a user's plain folder: no project here or above
    (".", ".", True),
    (".", "data/raw", True),  # DVC looks upward, as `dvc` run from a subfolder does
    ("project", ".", False),  # a project below is not one the folder is inside
])
def test_a_folder_is_inside_a_dvc_project_where_dvc_finds_one(tmp_path: Path, dvc_folder_at: str | None,
                                                              asked_at: str, inside: bool) -> None:
    from dvc.exceptions import NotDvcRepoError
    from dvc.repo import Repo

    if dvc_folder_at is not None:
        (tmp_path / dvc_folder_at / ".dvc").mkdir(parents=True)
    (folder := tmp_path / asked_at).mkdir(parents=True, exist_ok=True)
    assert inside_a_dvc_project(folder) is inside
    try:
        Repo.find_root(str(folder))
        found = True
    except NotDvcRepoError:
        found = False
    assert found is inside  # DVC's own answer


def test_a_source_inside_a_folder_that_is_no_dvc_project_is_passed_without_importing_dvc(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "toy.jsonl").write_text("")
    check = ("import sys; from pathlib import Path; from tracevote.core.inputs import output_sources; "
             "lines = output_sources({'toy': 'data/toy.jsonl'}, Path('.'), Path('params.yaml')); "
             "print(lines, 'dvc.repo' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=project_env(), capture_output=True,
                           text=True, timeout=hang_guard_s())
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == ["[]", "False"]
