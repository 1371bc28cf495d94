"""`make try DATA=<folder>` (`demo --data`): the datasets of params.yaml read from a folder's files, each method
on those of its datasets found there, the built-in demo files for a method that found none."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, committed_params_text
from tests.dvcproject import run
from tests.fresh_clone import make, set_up_clone, venv_stamp  # noqa: F401 (a fixture)
from tracevote.cli import demo, main
from tracevote.core.config import load_params
from tracevote.core.errors import DataError

SHARED = REPO_ROOT.parent / "shared" / "data"


def shipped_params() -> dict:
    return yaml.safe_load(committed_params_text())


def write_problems(path: Path, key: str) -> None:
    """The built-in demo problems, their problem field renamed to `key`."""
    rows = [json.loads(line) for line in demo.BUILTIN_PROBLEMS.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps({key: row["problem"], "answer": row["answer"]}) + "\n" for row in rows),
                    encoding="utf-8")


def test_the_command_line_offers_every_method_the_demo_knows() -> None:
    assert sorted(main.REAL_METHODS) == sorted(demo.METHOD_TARGETS)
    assert set(main.DEMO_METHODS) == set(main.REAL_METHODS) - {"online"}


@pytest.mark.parametrize(("files", "name", "expected"), [
    (["aime_2025.jsonl"], "aime_2025", "aime_2025.jsonl"),
    (["gsm8k_test.jsonl"], "gsm8k", "gsm8k_test.jsonl"),
    (["processbench_gsm8k.json"], "processbench_gsm8k", "processbench_gsm8k.json"),
    (["gsm8k.csv", "gsm8k_test.jsonl"], "gsm8k", "gsm8k.csv"),  # the dataset's own name first
    (["aime_2025.jsonl", "aime_2025.parquet"], "aime_2025", "aime_2025.jsonl"),
    (["aime_2025.txt", "aime_2024.jsonl"], "aime_2025", None),
])
def test_find_local_file(tmp_path: Path, files: list[str], name: str, expected: str | None) -> None:
    for file in files:
        (tmp_path / file).write_text("", encoding="utf-8")
    assert demo.find_local_file(tmp_path, name) == (tmp_path / expected if expected else None)


@pytest.mark.parametrize("key", ["problem", "question"])
def test_a_problems_file_is_read_by_the_field_its_rows_have(tmp_path: Path, key: str) -> None:
    write_problems(tmp_path / "aime_2025.jsonl", key)
    entry = demo.local_recipe(shipped_params()["datasets"]["aime_2025"], tmp_path / "aime_2025.jsonl")
    assert entry["problem_key"] == key
    assert entry["source"]["path"] == str((tmp_path / "aime_2025.jsonl").resolve())


def test_a_method_with_no_file_runs_on_the_built_in_demo_files(tmp_path: Path) -> None:
    write_problems(tmp_path / "aime_2025.jsonl", "question")
    scratch = tmp_path / "scratch"
    plan = demo.prepare(REPO_ROOT, scratch, demo.BUILTIN_PROBLEMS, data=tmp_path)
    params = load_params(scratch / "params.yaml")  # every key validated, as check_params does
    assert plan.sources == {"aime_2025": tmp_path / "aime_2025.jsonl"}
    assert plan.fallbacks == ["critique"]
    assert (params.deepconf.datasets, params.debate.datasets) == (("aime_2025",), ("aime_2025",))
    assert params.critique.datasets == tuple(demo.demo_step_datasets())
    assert list(params.grading.runs) == ["pool_aime_2025"]
    assert params.model.backend == "sim" and params.pool.n_pool == demo.DEMO_POOL


@pytest.mark.parametrize(("make_folder", "message"), [
    (lambda folder: None, "not a folder"),
    (lambda folder: folder.mkdir(), "holds no file for any dataset of params.yaml"),
])
def test_a_folder_without_datasets_is_one_clear_error(tmp_path: Path, make_folder, message: str) -> None:
    folder = tmp_path / "data"
    make_folder(folder)
    with pytest.raises(DataError, match=message):
        demo.prepare(REPO_ROOT, tmp_path / "scratch", demo.BUILTIN_PROBLEMS, data=folder)
    assert not (tmp_path / "scratch").exists()


def test_the_shared_files_feed_every_method() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (the shared data files are not part of the repository)")
    plan, overrides = demo.local_overrides(shipped_params(), SHARED)
    assert plan.fallbacks == []
    assert overrides["critique"]["datasets"] == ["processbench_gsm8k"]  # DeltaBench is not shared
    assert overrides["datasets"]["aime_2025"]["problem_key"] == "question"
    assert overrides["datasets"]["gsm8k"]["source"]["path"] == str((SHARED / "gsm8k_test.jsonl").resolve())


@pytest.mark.slow
def test_make_try_runs_one_method_on_a_folder_of_files(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, venv_stamp: None) -> None:  # noqa: F811
    clone, data = set_up_clone(tmp_path_factory, tmp_path / "clone"), tmp_path / "data"
    data.mkdir()
    write_problems(data / "aime_2024.jsonl", "question")
    shutil.copy(demo.BUILTIN_PROBLEMS, data / "aime_2025.jsonl")
    result = make(clone, "try", f"DATA={data}", "METHOD=debate")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    alone = clone / "demo" / "methods" / "debate"  # one method's own scratch project
    debate = json.loads((alone / "metrics" / "debate.json").read_text(encoding="utf-8"))
    assert debate["simulated"] is True and debate["problems"] == 24
    assert not (alone / "pools" / "aime_2025").exists()  # one method: DeepConf's pool was not built
    assert run(clone, "git", "status", "--porcelain").stdout == ""
