"""`ledger verify` and `ledger repair` agree with the readers: the grading critic's ledger passes verify (its items
are registered like every other ledger's), a duplicated frame is reported by verify as what repair drops, and a
directory where a log belongs is one line in verify, repair and the stage, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import copy_project, project_env
from tests.grading.test_cli import grade, predictions_for_gsm8k, sim_project
from tracevote.store import framing
from tracevote.store.calls import CallLedger, CallRecord, encode
from tracevote.store.verify import repair_ledger, verify_ledger

CRITIC_ARGS = ("--dataset", "gsm8k", "--enable-critic", "--critic-max-samples", "3", "--json")


def tracevote(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracevote", *args], cwd=cwd, env=project_env(), capture_output=True,
                          text=True, timeout=hang_guard_s())


def record(key: str) -> bytes:
    return encode(CallRecord(key, "solve", "0" * 64, f"reply {key}", "stop", 10, 0, 5, 0.0, 0.1, simulated=True))


def call_ledger(root: Path) -> CallLedger:
    ledger = CallLedger.open_at(root, {"method": "test"}, simulated=True)
    ledger.register_digests({"item": "digest"})
    with ledger.writer("item") as writer:
        for key in ("r1", "r2", "r3"):
            writer.append(key, record(key))
    return ledger


def critic_args(project: Path) -> tuple[str, ...]:
    return (*CRITIC_ARGS, "--pred-path", str(project / "preds.jsonl"))


@pytest.fixture(scope="module")
def graded_with_critic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A project graded once with the critic on (its ledger in grading/critic/cli), and that run; a test that
    changes the project copies it."""
    project = sim_project(tmp_path_factory.mktemp("critic-ledger"))
    predictions_for_gsm8k(project)
    return project, grade(project, *critic_args(project))


def test_the_critics_ledger_passes_verify_after_grade_enable_critic(
        graded_with_critic: tuple[Path, subprocess.CompletedProcess]) -> None:
    project, graded = graded_with_critic
    assert graded.returncode == 0, graded.stderr
    verified = tracevote(project, "ledger", "verify")
    assert verified.returncode == 0, verified.stdout
    assert "grading/critic/cli/simulated-" in verified.stdout and ": 3 logs, 3 good frames: ok" in verified.stdout


def test_a_duplicated_frame_is_reported_by_verify_as_what_repair_drops(tmp_path: Path) -> None:
    ledger = call_ledger(tmp_path / "ledger")
    log = ledger.log_path("item")
    frames = framing.survey(log, check_every_crc=True).frames
    second, end = log.read_bytes()[frames[1].offset:frames[2].offset], log.stat().st_size
    with open(log, "ab") as handle:  # r2 again, as a hand-made concatenation of two copies would leave it
        handle.write(second)
    read_before = {key: record.text for key, record in CallLedger(ledger.root).records("item").items()}

    report = verify_ledger(ledger.root)
    assert not report.ok
    assert report.logs[0].bad_frames == [f"byte {end:,}: a second copy of key 'r2' (the "
                                         f"one read is at byte {frames[1].offset:,}); repair drops it"]
    size = log.stat().st_size
    [repair] = repair_ledger(ledger.root)
    assert (repair.kept, repair.dropped_bytes) == (3, len(second)) and log.stat().st_size == size - len(second)
    assert verify_ledger(ledger.root).ok and repair_ledger(ledger.root) == []
    assert {key: record.text for key, record in CallLedger(ledger.root).records("item").items()} == read_before


def test_a_directory_where_a_log_belongs_is_one_line_to_every_reader_and_writer(tmp_path: Path) -> None:
    ledger = call_ledger(tmp_path / "ledger")
    log = ledger.log_path("item")
    log.unlink()
    log.mkdir()
    said = f"{log}: a directory where a ledger log belongs; move it out of the way"
    for use in (lambda: CallLedger(ledger.root).records("item"), lambda: ledger.writer("item"),
                lambda: ledger.missing({"item": ["r1"]}), lambda: repair_ledger(ledger.root)):
        with pytest.raises(Exception, match=said) as caught:
            use()
        assert type(caught.value).__name__ == "DataError"
    assert [problem for problem in verify_ledger(ledger.root).problems if problem.startswith(said)]


def test_a_directory_where_a_critic_log_belongs_is_one_line_in_verify_repair_and_the_stage(
        graded_with_critic: tuple[Path, subprocess.CompletedProcess], tmp_path: Path) -> None:
    graded_project, graded = graded_with_critic
    assert graded.returncode == 0
    project = copy_project(graded_project, tmp_path / "project")
    args = critic_args(project)
    log = sorted((project / "grading" / "critic" / "cli").glob("*/calls/*.tvf"))[0]
    log.unlink()
    log.mkdir()
    said = f"{log.relative_to(project)}: a directory where a ledger log belongs; move it out of the way"

    verified = tracevote(project, "ledger", "verify")
    assert verified.returncode == 1 and any(line.startswith(f"  {said}") for line in verified.stdout.splitlines())
    for result in (tracevote(project, "ledger", "repair"), grade(project, *args)):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith(f"error: {said}")
