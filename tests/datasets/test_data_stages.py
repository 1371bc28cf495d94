"""fetch and normalize as DVC stages in a real temporary git repo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.dvcproject import dvc, make_project, one_dataset
from tests.stage_here import run_stage_here
from tracevote.datasets.problems import load_problems

pytestmark = pytest.mark.slow


def local_source(path: Path, problem_key: str = "problem") -> dict:
    return one_dataset("toy", path, problem_key=problem_key)


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_shared_aime_2025_yields_30_records(tmp_path: Path, shared_data: Path) -> None:
    project = make_project(tmp_path / "project", local_source(shared_data / "aime_2025.jsonl", "question"))
    dvc(project, "repro", "normalize")
    problems = load_problems(project / "data" / "toy.jsonl")
    expected = [int(json.loads(line)["answer"]) for line in (shared_data / "aime_2025.jsonl").open()]
    assert len(problems) == 30
    assert [p.answer for p in problems] == expected


FIRST_REPRO = "first-repro.txt"  # beside the project: what its first `dvc repro normalize` printed


@pytest.fixture(scope="module")
def fetched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose five-row source, good.jsonl beside it, is fetched and normalized by a first `dvc repro
    normalize` (its output kept in first-repro.txt beside it): each test that breaks the source puts it back, and
    nothing it runs succeeds, so the next finds this state."""
    root = tmp_path_factory.mktemp("fetched")
    rows = write_rows(root / "good.jsonl", [{"problem": f"Compute {i}+1.", "answer": str(i + 1)} for i in range(5)])
    project = make_project(root / "project", local_source(rows))
    (root / FIRST_REPRO).write_text(dvc(project, "repro", "normalize").stdout)
    return project


def test_repro_runs_fetch_and_normalize_then_nothing(fetched: Path) -> None:
    first = (fetched.parent / FIRST_REPRO).read_text()
    assert "Running stage 'fetch@toy'" in first
    assert "Running stage 'normalize@toy'" in first
    problems = load_problems(fetched / "data" / "toy.jsonl")
    assert [p.answer for p in problems] == [1, 2, 3, 4, 5]

    # its verdict is `dvc status`'s: DVC prints it when no stage of the targets' graph changed
    second = dvc(fetched, "repro", "normalize")
    assert "Running stage" not in second.stdout
    assert "Stage 'normalize@toy' didn't change, skipping" in second.stdout
    assert second.stdout.strip().endswith("Data and pipelines are up to date.")


def test_bad_rows_fail_the_stage_and_keep_the_good_output(fetched: Path) -> None:
    rows = fetched.parent / "good.jsonl"
    source = rows.read_bytes()
    good = (fetched / "data" / "toy.jsonl").read_bytes()

    write_rows(rows, [{"problem": "Compute 1+1.", "answer": "2"}, {"problem": "\x0crac12", "answer": "x"}])
    try:
        failed = dvc(fetched, "repro", "-f", "normalize", check=False)
    finally:
        rows.write_bytes(source)
    assert failed.returncode != 0
    assert "row 2: field 'problem': contains control character U+000C" in failed.stderr + failed.stdout
    assert "row 2: field 'answer': 'x' is not an integer" in failed.stderr + failed.stdout
    assert (fetched / "data" / "toy.jsonl").read_bytes() == good
    assert not list((fetched / "data").glob(".*.tmp"))


BAD_SOURCES = [
    # (file name, content, the error line's text after the file name, whether through `dvc repro`): one through DVC,
    # the others by the fetch stage's script in the test's process (the refusal is fetch's; what DVC adds, one shows)
    ("empty.jsonl", "", "the dataset file holds no rows", True),
    ("rows.parquet", '{"problem": "Compute 1+1.", "answer": "2"}\n', "not a readable Parquet file", False),
    ("rows.json", '{"problem": "Compute 1+1.", "answer": "2"}\n{"problem": "Compute 2+2.", "answer": "4"}\n',
     "not valid JSON", False),
    ("bad.jsonl", '{"problem": "Compute 1+1.", "answer": "two"}\n', "1 problem(s), nothing written:", False),
    ("renamed.jsonl", '{"question": "Compute 1+1.", "answer": "2"}\n', "1 problem(s), nothing written:", False),
]


@pytest.mark.parametrize(("name", "content", "message", "through_dvc"), BAD_SOURCES,
                         ids=[case[0] for case in BAD_SOURCES])
def test_fetch_refuses_a_bad_source_and_keeps_the_raw_rows(fetched: Path, name: str, content: str, message: str,
                                                          through_dvc: bool) -> None:
    kept = {path: (fetched / path).read_bytes() for path in ("data/raw/toy.jsonl", "data/toy.jsonl", "dvc.lock")}
    source = fetched.parent / name
    source.write_text(content)
    params = (fetched / "params.yaml").read_text()
    (fetched / "params.yaml").write_text(params.replace(str(fetched.parent / "good.jsonl"), str(source)))
    try:
        if through_dvc:
            failed = dvc(fetched, "repro", "normalize", check=False)
        else:
            failed = run_stage_here(fetched, "fetch.py", "--dataset", "toy", "--out", "data/raw/toy.jsonl", check=False)
    finally:
        (fetched / "params.yaml").write_text(params)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "Traceback" not in output
    assert f"error: {source}: {message}" in output
    assert {path: (fetched / path).read_bytes() for path in kept} == kept
