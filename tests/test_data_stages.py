"""fetch and normalize as DVC stages in a real temporary git repo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dvcproject import dvc, make_project
from tracevote.datasets import load_problems

pytestmark = pytest.mark.slow


def local_source(path: Path, problem_key: str = "problem") -> dict:
    return {"dataset": {"name": "toy", "source": {"path": str(path)}, "problem_key": problem_key}}


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_repro_runs_fetch_and_normalize_then_nothing(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "toy.jsonl", [{"problem": f"Compute {i}+1.", "answer": str(i + 1)}
                                               for i in range(5)])
    project = make_project(tmp_path / "project", local_source(rows))

    first = dvc(project, "repro", "normalize")
    assert "Running stage 'fetch'" in first.stdout
    assert "Running stage 'normalize'" in first.stdout
    problems = load_problems(project / "data" / "toy.jsonl")
    assert [p.answer for p in problems] == [1, 2, 3, 4, 5]

    second = dvc(project, "repro", "normalize")
    assert "Running stage" not in second.stdout
    assert dvc(project, "status", "normalize").stdout.strip() == "Data and pipelines are up to date."


def test_shared_aime_2025_yields_30_records(tmp_path: Path, shared_data: Path) -> None:
    project = make_project(tmp_path / "project", local_source(shared_data / "aime_2025.jsonl", "question"))
    dvc(project, "repro", "normalize")
    problems = load_problems(project / "data" / "toy.jsonl")
    expected = [int(json.loads(line)["answer"]) for line in (shared_data / "aime_2025.jsonl").open()]
    assert len(problems) == 30
    assert [p.answer for p in problems] == expected


def test_bad_rows_fail_the_stage_and_keep_the_good_output(tmp_path: Path) -> None:
    rows = write_rows(tmp_path / "toy.jsonl", [{"problem": "Compute 1+1.", "answer": "2"}])
    project = make_project(tmp_path / "project", local_source(rows))
    dvc(project, "repro", "normalize")
    good = (project / "data" / "toy.jsonl").read_bytes()

    write_rows(rows, [{"problem": "Compute 1+1.", "answer": "2"}, {"problem": "\x0crac12", "answer": "x"}])
    failed = dvc(project, "repro", "-f", "normalize", check=False)
    assert failed.returncode != 0
    assert "row 2: field 'problem': contains control character U+000C" in failed.stderr + failed.stdout
    assert "row 2: field 'answer': 'x' is not an integer" in failed.stderr + failed.stdout
    assert (project / "data" / "toy.jsonl").read_bytes() == good
    assert not list((project / "data").glob(".*.tmp"))
