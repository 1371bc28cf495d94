"""`python -m tracevote sim-server` as a user starts it: it says which gold answers it knows (from --problems, else
the project's normalized problems), warns when it knows none, and a taken port or a bad fault spec is one line."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PARAMS
from tests.dvcproject import project_env
from tracevote.cli.demo import BUILTIN_PROBLEMS
from tracevote.core.config import load_params
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.normalize import normalize_rows

STARTUP_S = 120  # generous: a loaded machine imports slowly; the test waits for the line, never for the time


def sim_server(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tracevote", "sim-server", *args], cwd=cwd, env=project_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def lines_until_listening(server: subprocess.Popen[str]) -> Iterator[str]:
    """Its output lines up to and including "listening on ...", then it is stopped."""
    assert server.stdout is not None
    try:
        for line in server.stdout:
            yield line.rstrip("\n")
            if "listening on" in line:
                return
        pytest.fail(f"sim-server exited ({server.wait(STARTUP_S)}) before listening")
    finally:
        server.terminate()
        server.wait(STARTUP_S)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    return tmp_path


def test_without_known_answers_it_warns_that_accuracy_means_nothing(project: Path) -> None:
    said = list(lines_until_listening(sim_server(project, "--port", str(free_port()))))
    assert any("WARNING: it knows no gold answers" in line and "means nothing" in line for line in said), said


def test_it_learns_the_gold_answers_of_the_projects_normalized_problems(project: Path) -> None:
    config = load_params(FIXTURE_PARAMS).dataset("aime_2025")
    problems = normalize_rows(read_local_rows(BUILTIN_PROBLEMS), config, "demo")
    write_jsonl(project / "data" / "aime_2025.jsonl", (p.to_record() for p in problems))
    said = list(lines_until_listening(sim_server(project, "--port", str(free_port()))))
    assert f"sim-server: knows the gold answers of {len(problems)} problems (data/aime_2025.jsonl)" in said
    assert not any("WARNING" in line for line in said)


def test_a_taken_port_is_one_line_naming_it(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "tracevote", "sim-server", "--port", str(port)], cwd=project,
                                env=project_env(), capture_output=True, text=True, timeout=STARTUP_S)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use); is another server "
        f"(an earlier sim-server?) on that port? Choose another with --port")
    assert "Traceback" not in result.stderr


def test_a_bad_fault_spec_is_refused_before_the_banner(project: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tracevote", "sim-server", "--faults", "bogus=0.5"], cwd=project,
                            env=project_env(), capture_output=True, text=True, timeout=STARTUP_S)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --faults 'bogus=0.5': unknown fault 'bogus'")
