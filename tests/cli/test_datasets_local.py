"""Issue 29: `python -m tracevote datasets local DIR`, the real project offline in one step, and the hub error that
names it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, hang_guard_s
from tests.dvcproject import dvc, make_project, project_env, run_stage
from tests.rows_server import RowsAPI, serve_rows
from tracevote.cli import datasets_local as local
from tracevote.cli.demo import BUILTIN_STEPS, write_params
from tracevote.core.config import load_params
from tracevote.datasets.problems import load_problems

SHARED_FILES = {"aime_2025": "aime_2025.jsonl", "aime_2024": "aime_2024.jsonl", "gsm8k": "gsm8k_test.jsonl",
                "math500": "math500_test.jsonl", "amc23": "amc23_test.jsonl",
                "processbench_gsm8k": "processbench_gsm8k.json"}


def datasets_local(cwd: Path, data: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracevote", "datasets", "local", str(data)], cwd=cwd,
                          env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())


def test_every_dataset_with_a_file_is_pointed_at_it_and_the_rest_removed(tmp_path: Path,
                                                                          shared_data: Path) -> None:
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    done = datasets_local(tmp_path, shared_data)
    assert done.returncode == 0, done.stderr
    assert f"datasets local: aime_2025 <- {shared_data / 'aime_2025.jsonl'} (problem_key: question, as the file " \
           f"says)" in done.stdout
    assert f"datasets local: gsm8k <- {shared_data / 'gsm8k_test.jsonl'}\n" in done.stdout
    assert "datasets local: removed deltabench (no file for it) from datasets:" in done.stdout
    assert "datasets local: kept tinymath as they are (already read from a local file)" in done.stdout
    assert "datasets local: critique.datasets is now [processbench_gsm8k]" in done.stdout
    params = load_params(tmp_path / "params.yaml")
    tinymath_path = "src/tracevote/datasets/data/tinymath_heldout.jsonl"
    assert {name: Path(d.source.path).name for name, d in params.datasets.items()} == {
        **SHARED_FILES, "tinymath": Path(tinymath_path).name}
    assert params.datasets["tinymath"].source.path == tinymath_path  # already local: left as it was
    assert all(d.source.hf_dataset is None and d.source.watch == d.source.path for d in params.datasets.values())
    assert params.critique.datasets == ("processbench_gsm8k",)
    text = (tmp_path / "params.yaml").read_text()
    kept = [line for line in FIXTURE_PARAMS.read_text().splitlines() if line.lstrip().startswith("#")
            and "deltabench" not in line.lower()]
    assert [line for line in kept if line not in text.splitlines()] == []  # DVC's writer keeps the comments


def test_a_method_left_with_none_of_its_datasets_is_refused_and_nothing_written(tmp_path: Path) -> None:
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    before = (tmp_path / "params.yaml").read_bytes()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "aime_2025.jsonl").write_text('{"question": "Compute 1+1.", "answer": "2"}\n')
    refused = datasets_local(tmp_path, tmp_path / "data")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: critique.datasets: none of processbench_gsm8k, deltabench has a file "
                                     f"in {tmp_path / 'data'} (<name> or <name>_test with .jsonl, .json, .parquet, "
                                     f".csv); add one, or name another dataset there; nothing written")
    assert "Traceback" not in refused.stderr
    assert (tmp_path / "params.yaml").read_bytes() == before


def test_a_live_run_on_a_dataset_with_no_file_is_emptied_too(tmp_path: Path) -> None:
    """As after the live-online page, on a dataset the folder lacks: online.live.datasets loses it, as each method's
    list does, and check_params passes."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    params["online"]["live"] = {**params["online"]["live"], "datasets": ["aime_2024"], "methods": ["low"]}
    write_params(tmp_path / "params.yaml", params)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "aime_2025.jsonl").write_text('{"question": "Compute 1+1.", "answer": "2"}\n')
    shutil.copy(BUILTIN_STEPS, tmp_path / "data" / "processbench_gsm8k.jsonl")
    done = datasets_local(tmp_path, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert "datasets local: online.live.datasets is now []" in done.stdout.splitlines()
    assert load_params(tmp_path / "params.yaml").online.live.datasets == ()


def test_a_relative_folder_is_written_relative_to_the_params_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages run in the params file's folder: a relative DIR given from elsewhere is rewritten from there."""
    (tmp_path / "project").mkdir()
    shutil.copy(FIXTURE_PARAMS, tmp_path / "project" / "params.yaml")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("aime_2025", "aime_2024"):
        (data / f"{name}.jsonl").write_text('{"question": "Compute 1+1.", "answer": "2"}\n')
    (data / "processbench_gsm8k.jsonl").write_text('{"id": "a", "problem": "P", "steps": ["s"], "label": -1}\n')
    monkeypatch.chdir(tmp_path)
    said = local.datasets_local(Path("data"), Path("project/params.yaml"))
    assert "datasets local: aime_2025 <- ../data/aime_2025.jsonl (problem_key: question" in said
    params = load_params(tmp_path / "project" / "params.yaml")
    assert params.datasets["aime_2025"].source.path == "../data/aime_2025.jsonl"
    assert sorted(params.datasets) == ["aime_2024", "aime_2025", "processbench_gsm8k", "tinymath"]


@pytest.mark.slow
def test_the_project_then_fetches_and_normalizes_every_dataset_offline(tmp_path: Path, shared_data: Path) -> None:
    project = make_project(tmp_path / "project")
    assert datasets_local(project, shared_data).returncode == 0
    # no hub is reachable: every api_url points at a closed port
    ran = dvc(project, "repro", "check_params", "normalize", env=project_env({"HTTPS_PROXY": "http://127.0.0.1:9"}))
    assert "check_params: params.yaml is valid (7 datasets;" in ran.stdout  # the six files and the shipped tinymath
    assert len(load_problems(project / "data" / "tinymath.jsonl")) == 100
    assert len(load_problems(project / "data" / "aime_2025.jsonl")) == 30
    assert dvc(project, "status", "normalize").stdout.strip() == "Data and pipelines are up to date."


def test_an_unreachable_or_refusing_hub_names_the_offline_ways(tmp_path: Path) -> None:
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    with serve_rows(RowsAPI([{"problem": "Compute 1+1.", "answer": "2"}], faults=[(404, {})])) as url:
        params["datasets"]["aime_2025"]["source"]["api_url"] = url
        write_params(tmp_path / "params.yaml", params)
        failed = run_stage(tmp_path, "fetch.py", "--dataset", "aime_2025", "--out", "data/raw/aime_2025.jsonl",
                           check=False)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert failed.stderr.count("\n") == 1  # one line
    assert "HTTP 404" in failed.stderr
    assert ("Offline, read local files instead: `python -m tracevote datasets local DIR` points every dataset with "
            "a file in DIR at it (and removes the rest), or set datasets.aime_2025.source.path (and watch) to a "
            "local file; `make try DATA=DIR` runs every method") in failed.stderr
    assert not (tmp_path / "data" / "raw" / "aime_2025.jsonl").exists()
