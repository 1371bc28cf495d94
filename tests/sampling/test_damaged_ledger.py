"""A flipped byte in a built pool, end to end: build_pool says "damaged" and names the repair command, `ledger verify`
names the log, `ledger repair` keeps the good frames, and the rerun requests only the lost sample, to the same pool
a clean build makes, against a loopback sim server counting requests. build_pool's refusals and the rebuild that
TRACEVOTE_REBUILD in its environment allows run as processes, as DVC runs them; the two first builds (setup steps) and
the `ledger` commands, whose claims are what they find and keep, run in the test's own process (tests/stage_here.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.sampling.test_run_control import (
    build_pool,
    build_pool_here,
    error_line,
    pool_samples,
    project,
    requests_sent,
    sim_server,
    the_pool,
)
from tests.stage_here import TRACEVOTE_MAIN, run_script_here
from tracevote.sampling.paid import REBUILD_ENV
from tracevote.store import framing

N_POOL = 4


def flip_a_byte_in_frame_1(log: Path) -> None:
    frame_1 = framing.survey(log, check_every_crc=True).frames[1]
    data = bytearray(log.read_bytes())
    data[frame_1.offset + framing.HEADER.size + 40] ^= 0x01
    log.write_bytes(bytes(data))


def lock_as_built(root: Path) -> None:
    """dvc.lock recording build_pool@toy as finished with these params, as a `dvc repro` would have."""
    lock = {"schema": "2.0", "stages": {"build_pool@toy": {"cmd": "python stages/build_pool.py", "params": {
        "params.yaml": {"pool.n_pool": N_POOL}}}}}
    (root / "dvc.lock").write_text(yaml.safe_dump(lock), encoding="utf-8")


def test_a_damaged_pool_is_named_verified_repaired_and_topped_up_by_one_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def tracevote(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run_script_here(cwd, TRACEVOTE_MAIN, list(args), monkeypatch, capsys, without_api_keys=True)

    (tmp_path / "clean").mkdir()
    (tmp_path / "damaged").mkdir()
    with sim_server() as server:
        clean = project(tmp_path / "clean", server.base_url, n_pool=N_POOL)
        root = project(tmp_path / "damaged", server.base_url, n_pool=N_POOL)
        assert build_pool_here(clean).returncode == 0
        assert build_pool_here(root).returncode == 0
        log = next(the_pool(root).root.rglob("*.tvf"))
        flip_a_byte_in_frame_1(log)
        lock_as_built(root)

        before = requests_sent(server)
        refused = build_pool(root)
        verified = tracevote(root, "ledger", "verify")
        repaired = tracevote(root, "ledger", "repair", str(log.relative_to(root)))
        verified_after = tracevote(root, "ledger", "verify", "pools/toy")
        guarded = build_pool(root)
        sent_before_rebuild = requests_sent(server) - before
        rebuilt = build_pool(root, **{REBUILD_ENV: "1"})
        sent_by_rebuild = requests_sent(server) - before - sent_before_rebuild

    line = error_line(refused)
    assert f"{log.name}: damaged at byte" in line and "ledger repair" in line, line
    assert verified.returncode == 1, verified.stdout + verified.stderr
    assert f"{log.name}: DAMAGED at byte" in verified.stdout and "PROBLEMS" in verified.stdout, verified.stdout
    assert repaired.returncode == 0 and f"kept {N_POOL - 1} good frames" in repaired.stdout, repaired.stdout
    assert verified_after.returncode == 0 and ": ok" in verified_after.stdout, verified_after.stdout
    assert "lacks some of its calls" in error_line(guarded) and REBUILD_ENV in error_line(guarded)
    assert sent_before_rebuild == 0, "neither the damaged pool nor the guard sent anything"
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert sent_by_rebuild == 1, "only the sample the damaged frame held was requested again"
    assert pool_samples(root) == pool_samples(clean)
    assert not [path for path in root.rglob("*.repairing")], "repair leaves no temporary file"
    assert os.listdir(log.parent) == os.listdir(the_pool(clean).root / log.parent.name)
