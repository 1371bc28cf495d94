"""Issue 29: `make demo DEMO_DATASET=<a .json list>` reads the list, and a second `make demo`/`make try` in the same
folder is refused in one line instead of deleting `demo/` under the first."""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import project_env
from tracevote.cli import demo
from tracevote.core.errors import DataError


@pytest.mark.parametrize(("rows", "key"), [
    ([{"question": "Compute 1+1.", "answer": "2"}], "question"),
    ([{"problem": "Compute 1+1.", "answer": "2"}], "problem"),
])
def test_a_json_list_of_problems_is_read_as_fetch_reads_it(tmp_path: Path, rows: list[dict], key: str) -> None:
    path = tmp_path / "problems.json"
    path.write_text(json.dumps(rows, indent=2))  # before issue 29: orjson.JSONDecodeError on its first line
    assert demo.guess_problem_key(path) == key
    assert demo.demo_overrides(path, problem_key=key)["datasets"]["demo_problems"]["problem_key"] == key


def test_a_bad_json_file_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "problems.json"
    path.write_text('{"question": "Compute 1+1.", "answer": "2"}')  # an object, not a list
    with pytest.raises(DataError, match=re.escape("problems.json: expected a JSON list of objects")):
        demo.guess_problem_key(path)


def test_a_second_demo_in_the_same_folder_is_refused_and_the_first_keeps_its_project(tmp_path: Path) -> None:
    scratch = tmp_path / "demo"
    scratch.mkdir()
    (scratch / "metrics.txt").write_text("the first run's results")
    lock = os.open(scratch / demo.LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held as the first run holds it
        os.write(lock, b"4242")
        second = subprocess.run([sys.executable, "-m", "tracevote", "demo"], cwd=tmp_path, env=project_env(),
                                capture_output=True, text=True, timeout=hang_guard_s())
    finally:
        os.close(lock)
    assert second.returncode == 2
    assert second.stderr == (f"error: {scratch}: another `make demo` or `make try` (process 4242) is running in it; "
                             f"wait for it to end (its lock: {scratch / demo.LOCK_NAME})\n")
    assert (scratch / "metrics.txt").read_text() == "the first run's results"


def test_the_lock_is_released_when_a_run_ends(tmp_path: Path) -> None:
    with demo.scratch_lock(tmp_path / "demo"):
        assert (tmp_path / "demo" / demo.LOCK_NAME).read_text() == str(os.getpid())
    with demo.scratch_lock(tmp_path / "demo"):  # a later run takes it
        demo.clear_scratch(tmp_path / "demo")
    assert [path.name for path in (tmp_path / "demo").iterdir()] == [demo.LOCK_NAME]
