"""A failed stage keeps every earlier good output, byte for byte, and says why in one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.dvcproject import dvc, run, run_stage, update_params
from tests.test_pipeline import build_once, ran_stages

pytestmark = pytest.mark.slow

OUTPUT_DIRS = ("data", "metrics", "plots")


def snapshot(project: Path) -> dict[str, bytes]:
    """Every output file the pipeline wrote (pools aside: build_pool is persistent and resumable)."""
    files = [path for folder in OUTPUT_DIRS for path in (project / folder).rglob("*") if path.is_file()]
    return {str(path.relative_to(project)): path.read_bytes() for path in files}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed project in which every stage ran: this module's own copy of the one tests/test_pipeline.py builds
    once per run (each test breaks an input and restores it)."""
    return build_once(tmp_path_factory)


def empty_source(project: Path) -> None:
    empty = project.parent / "empty.jsonl"
    empty.write_text("")
    update_params(project, {"datasets": {"toy": {"source": {"path": str(empty), "watch": str(empty)}}}})


CASES: list[tuple[str, Callable[[Path], None], str]] = [
    # (stage, how to break its input, what its error says)
    ("fetch", empty_source, "empty.jsonl: the dataset file holds no rows"),
    ("normalize", lambda p: update_params(p, {"datasets": {"toy": {"problem_key": "question"}}}),
     "field 'question': missing (row keys:"),  # one line names every row that shares it
    ("score", lambda p: update_params(p, {"confidence": {"group_size": -1}}), "confidence.group_size: -1"),
    ("aggregate", lambda p: update_params(p, {"eval": {"repeat": 0}}), "eval.repeat: 0"),
    ("report", lambda p: update_params(p, {"report": {"k": 3}}), "report.k: 3"),
]


@pytest.mark.parametrize(("stage", "break_input", "message"), CASES, ids=[case[0] for case in CASES])
def test_a_failed_stage_keeps_the_last_good_output(built: Path, stage: str, break_input: Callable[[Path], None],
                                                   message: str) -> None:
    before, locked = snapshot(built), (built / "dvc.lock").read_bytes()
    break_input(built)
    try:
        failed = dvc(built, "repro", stage, check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0
        assert f"Running stage '{stage}@toy'" in output
        assert "Traceback" not in output
        assert len([line for line in output.splitlines() if line.startswith("error: ")]) == 1
        assert message in output  # normalize lists every bad row on the lines after its error line
        # every output and DVC's record of them as they were: with the input restored, the project is up to date
        assert snapshot(built) == before
        assert (built / "dvc.lock").read_bytes() == locked
        assert not list(built.rglob(".*.tmp"))
    finally:
        run(built, "git", "checkout", "--", ".")


@pytest.mark.parametrize(("change", "key"), [({"pool": {"concurency": 4}}, "pool.concurency"),
                                              ({"evall": {"k": [1]}}, "evall")])
def test_an_unknown_key_fails_repro_before_any_stage(built: Path, change: dict, key: str) -> None:
    before = snapshot(built)
    update_params(built, change)
    try:
        failed = dvc(built, "repro", check=False)
        output = failed.stdout + failed.stderr
        assert failed.returncode != 0
        assert ran_stages(output) == set()
        assert f"{key}: unknown key (did you mean " in output
        assert snapshot(built) == before
    finally:
        run(built, "git", "checkout", "--", "params.yaml")


OCCUPIED = [  # (stage script and its arguments as dvc.yaml gives them, the output folder a file will occupy)
    (["score.py", "--problems", "data/toy.jsonl", "--manifest", "pools/toy.json", "--out", "data/scores/toy.parquet",
      "--stops", "data/scores/toy.stops.parquet"], "data/scores"),
    (["score_debate.py", "--debates", "debates", "--metrics", "metrics/debate.json", "--headline",
      "metrics/headline/debate.json", "--details", "metrics/debate_results.json", "--table", "metrics/debate.md"],
     "metrics/headline"),
    (["score_critiques.py", "--critiques", "critiques", "--metrics", "metrics/critique.json", "--headline",
      "metrics/headline/critique", "--details", "metrics/critique_results.jsonl", "--by-task",
      "metrics/critique_by_task.csv"], "metrics/headline/critique"),
    (["grade.py", "--run", "pool_toy", "--gold", "data/toy.jsonl", "--critic", "grading/critic/pool_toy", "--out",
      "grading/runs/pool_toy.json", "--details", "grading/runs/pool_toy.jsonl"], "grading/runs"),
]


@pytest.mark.parametrize(("command", "folder"), OCCUPIED, ids=[case[0][0].removesuffix(".py") for case in OCCUPIED])
def test_a_file_where_an_output_folder_goes_is_one_line_naming_it(built: Path, command: list[str],
                                                                 folder: str) -> None:
    occupied = built / folder
    aside = occupied.with_name(occupied.name + ".aside")
    occupied.rename(aside)
    occupied.write_text("a file where the stage's folder goes\n")
    before = snapshot(built)
    try:
        failed = run_stage(built, *command, check=False)
        after = snapshot(built)
    finally:
        occupied.unlink()
        aside.rename(occupied)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 2 and "Traceback" not in output
    assert failed.stderr.splitlines() == [f"error: {folder}: a file sits where an output folder goes; move or delete "
                                          f"it and run the stage again (nothing was written)"]
    assert after == before  # nothing written
