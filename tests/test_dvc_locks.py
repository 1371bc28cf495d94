"""Stale DVC stage locks from killed runs, and what dvc.lock says was already built."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import wait_for
from tracevote.core.dvclock import clear_stale_locks
from tracevote.core.dvcstate import already_built


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def started(command: list[str], argv0: bytes = b"") -> subprocess.Popen:
    """Start `command` and wait until /proc shows its command line starting with `argv0` (by default, the
    command itself): right after the fork it shows this test's own, and it reads empty right after exec."""
    process = subprocess.Popen(command)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    argv0 = argv0 or b"\0".join(arg.encode() for arg in command)

    def shows_command() -> bool:
        if process.poll() is not None:
            pytest.fail(f"{command} exited ({process.returncode}) before its command line showed")
        seen = cmdline.read_bytes()
        return bool(seen) and seen.startswith(argv0)

    wait_for(shows_command, f"/proc to show the command line of {command}")
    return process


# The processes below live until the test kills them: a fixed lifetime would end mid-test on a slow machine.


def fake_dvc() -> subprocess.Popen:
    """A live process whose command line is `/opt/venv/bin/dvc infinity`, as a running DVC's names dvc."""
    return started(["bash", "-c", 'exec -a "$0" sleep infinity', "/opt/venv/bin/dvc"], b"/opt/venv/bin/dvc\0")


def sleeper() -> subprocess.Popen:
    """A live process that is not DVC, such as one that reused a killed DVC's PID."""
    return started([sys.executable, "-c", "import threading; threading.Event().wait()"])


def test_clears_dead_entries_and_keeps_live_dvc_ones(tmp_path: Path) -> None:
    rwlock = tmp_path / "rwlock"
    dead, live = dead_pid(), fake_dvc()
    try:
        rwlock.write_text(json.dumps({
            "write": {"pools/aime_2025": {"pid": dead, "cmd": "dvc repro"},
                      "metrics/summary.json": {"pid": live.pid, "cmd": "dvc repro report"}},
            "read": {"data/aime_2025.jsonl": [{"pid": dead, "cmd": "dvc repro"},
                                              {"pid": live.pid, "cmd": "dvc repro report"}]},
        }))
        stale = clear_stale_locks(rwlock)
        assert {(entry.mode, entry.path, entry.pid) for entry in stale} == {
            ("write", "pools/aime_2025", dead), ("read", "data/aime_2025.jsonl", dead)}
        assert json.loads(rwlock.read_text()) == {
            "write": {"metrics/summary.json": {"pid": live.pid, "cmd": "dvc repro report"}},
            "read": {"data/aime_2025.jsonl": [{"pid": live.pid, "cmd": "dvc repro report"}]},
        }
        assert clear_stale_locks(rwlock) == []
    finally:
        live.kill()
        live.wait()


def test_a_reused_pid_running_something_else_is_stale(tmp_path: Path) -> None:
    rwlock = tmp_path / "rwlock"
    other = sleeper()
    try:
        rwlock.write_text(json.dumps({"write": {"pools/toy": {"pid": other.pid, "cmd": "dvc repro"}}, "read": {}}))
        assert [entry.pid for entry in clear_stale_locks(rwlock)] == [other.pid]
        assert json.loads(rwlock.read_text()) == {"write": {}, "read": {}}
    finally:
        other.kill()
        other.wait()


def test_no_lock_file_is_nothing_to_clear(tmp_path: Path) -> None:
    assert clear_stale_locks(tmp_path / "rwlock") == []


def test_already_built_compares_locked_params_with_current(tmp_path: Path) -> None:
    params = {"model": {"name": "deepseek-v4-flash", "backend": "openai"}, "pool": {"n_pool": 64, "concurrency": 8}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    lock = {"schema": "2.0", "stages": {"build_pool": {"cmd": "python stages/build_pool.py", "params": {
        "params.yaml": {"model": params["model"], "pool.n_pool": 64}}}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert already_built(tmp_path / "dvc.lock", "build_pool", tmp_path / "params.yaml")

    params["pool"]["concurrency"] = 2  # not a declared param: still the same build
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert already_built(tmp_path / "dvc.lock", "build_pool", tmp_path / "params.yaml")

    params["pool"]["n_pool"] = 128
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert not already_built(tmp_path / "dvc.lock", "build_pool", tmp_path / "params.yaml")
    assert not already_built(tmp_path / "missing.lock", "build_pool", tmp_path / "params.yaml")


def test_already_built_needs_the_same_content_of_each_file_dependency(tmp_path: Path) -> None:
    params = {"grading": {"critic": {"enabled": True}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"id": "a"}\n')
    lock = {"schema": "2.0", "stages": {"build_grading_critic@r": {"cmd": "python x.py", "deps": [
        {"path": "predictions.jsonl", "hash": "md5", "md5": hashlib.md5(predictions.read_bytes()).hexdigest()},
        {"path": "pools/toy", "hash": "md5", "md5": "0123456789abcdef0123456789abcdef.dir"},  # a folder: not compared
        {"path": "absent.jsonl", "hash": "md5", "md5": "0" * 32}],  # not on disk (a fresh clone): not compared
        "params": {"params.yaml": {"grading.critic": params["grading"]["critic"]}}}}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert already_built(tmp_path / "dvc.lock", "build_grading_critic@r", tmp_path / "params.yaml")
    predictions.write_text('{"id": "b"}\n')
    assert not already_built(tmp_path / "dvc.lock", "build_grading_critic@r", tmp_path / "params.yaml")
