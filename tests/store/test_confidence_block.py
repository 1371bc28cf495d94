"""Confidence blocks: the score stage's one-call read of a problem gives exactly what the log gives, is passed
over when stale or damaged, is checked by `ledger verify`, rewritten by repair, and a kill -9 while one is
written leaves the old block or the new one, never part of one."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EVENT_TIMEOUT_S, REPO_ROOT, wait_for
from tests.store.test_framing_codec import make_sample
from tracevote.core.errors import DataError
from tracevote.store import codec, confidence_block
from tracevote.store.pool import Pool
from tracevote.store.records import ProblemTraces, Sample
from tracevote.store.verify import repair_ledger, verify_ledger

SETTING = {"model": "deepseek-v4-flash", "temperature": 0.6}
PROBLEM = "p-1"


def pool_with(root: Path, sample_ids: list[int], *, tokens: int = 40, problems: tuple[str, ...] = (PROBLEM,),
              blocks: bool = True) -> Pool:
    """A real pool whose problems hold `sample_ids` (appended in that order) of `tokens` tokens each (sample 2 has
    none), C_i float32 with a NaN every 9th token; with `blocks`, each problem's block written as build_pool does."""
    pool = Pool.open_at(root, SETTING, simulated=False)
    pool.register_digests({problem_id: "digest" for problem_id in problems})
    for problem_id in problems:
        with pool.writer(problem_id) as writer:
            for sample_id in sample_ids:
                writer.append(sample_id, codec.encode(sample(problem_id, sample_id, 0 if sample_id == 2 else tokens)))
    if blocks:
        assert pool.write_confidence_blocks(problems) == len(problems)
    return pool


def sample(problem_id: str, sample_id: int, tokens: int) -> Sample:
    base = make_sample(n=tokens, k=0, keep_top=False, seed=sample_id)
    confidence = np.asarray(base.token_confidence, dtype=np.float32).copy()
    confidence[::9] = np.nan
    return dataclasses.replace(base, problem_id=problem_id, sample_id=sample_id, token_confidence=confidence,
                               finish_reason=["stop", "length"][sample_id % 2])


def same(found: ProblemTraces, expected: ProblemTraces) -> None:
    assert found.problem_id == expected.problem_id
    assert found.sample_ids.tolist() == expected.sample_ids.tolist()
    assert found.offsets.tolist() == expected.offsets.tolist()
    assert found.token_confidence.dtype == expected.token_confidence.dtype == np.float32
    assert np.array_equal(found.token_confidence, expected.token_confidence, equal_nan=True)
    assert list(found.finish_reasons) == list(expected.finish_reasons)
    assert found.candidates == expected.candidates


def block_read(pool: Pool, n_pool: int) -> ProblemTraces | None:
    return confidence_block.read_block(pool.block_path(PROBLEM), pool.log_path(PROBLEM), PROBLEM, n_pool)


@pytest.mark.parametrize(("stored", "n_pool"), [
    ([0, 1, 2, 3, 4], 5),  # every sample; sample 2 has no token
    ([0, 1, 2, 3, 4], 3),  # a prefix: only its bytes are read and checked
    ([4, 0, 3, 1], 2),  # appended out of order: the block is in sample-id order
    ([0, 5, 9], 100),  # gaps, n_pool beyond every id
    ([3, 4], 2),  # no sample below n_pool
])
def test_the_block_reads_exactly_what_the_log_holds(tmp_path: Path, stored: list[int], n_pool: int) -> None:
    pool = pool_with(tmp_path / "pool", stored)
    found = block_read(pool, n_pool)
    assert found is not None
    assert not found.token_confidence.flags.writeable  # a view of the mapped file, never written
    same(found, pool.read_frames(PROBLEM, n_pool))
    same(pool.read_problem(PROBLEM, n_pool), pool.read_frames(PROBLEM, n_pool))
    assert verify_ledger(pool.root).ok


def test_a_grown_log_makes_the_block_stale_and_the_log_is_read(tmp_path: Path) -> None:
    pool = pool_with(tmp_path / "pool", [0, 1])
    with pool.writer(PROBLEM) as writer:  # a top-up run appends sample 2... and is killed before its block
        writer.append(3, codec.encode(sample(PROBLEM, 3, 40)))
    assert block_read(pool, 10) is None
    same(pool.read_problem(PROBLEM, 10), pool.read_frames(PROBLEM, 10))
    assert pool.read_problem(PROBLEM, 10).sample_ids.tolist() == [0, 1, 3]
    assert any("stale" in problem for problem in verify_ledger(pool.root).problems)
    assert pool.write_confidence_blocks([PROBLEM]) == 1  # what the next build_pool does
    assert block_read(pool, 10) is not None
    assert pool.write_confidence_blocks([PROBLEM]) == 0  # in step: nothing to write


@pytest.mark.parametrize("where", ["header", "values"])
def test_a_damaged_block_is_passed_over_reported_and_repaired(tmp_path: Path, where: str) -> None:
    pool = pool_with(tmp_path / "pool", [0, 1, 2, 3])
    block = pool.block_path(PROBLEM)
    data = bytearray(block.read_bytes())
    data[20 if where == "header" else len(data) - 5] ^= 0xFF
    block.write_bytes(bytes(data))
    assert block_read(pool, 10) is None
    same(pool.read_problem(PROBLEM, 10), pool.read_frames(PROBLEM, 10))
    report = verify_ledger(pool.root)
    assert [problem.split(": ", 1)[0] for problem in report.problems] == [str(block)]
    assert "damaged" in report.problems[0]
    assert repair_ledger(pool.root) == []  # every frame is good: no log rewritten, the block is
    assert verify_ledger(pool.root).ok
    assert block_read(pool, 10) is not None


def test_a_cut_short_block_is_passed_over(tmp_path: Path) -> None:
    pool = pool_with(tmp_path / "pool", [0, 1, 2, 3])
    block = pool.block_path(PROBLEM)
    block.write_bytes(block.read_bytes()[:-8])
    assert block_read(pool, 10) is None
    assert block_read(pool, 1) is not None  # the first sample's values are all there, and pass their digest
    assert "damaged" in verify_ledger(pool.root).problems[0]


def test_verify_names_a_stray_block_and_a_killed_writes_leftover(tmp_path: Path) -> None:
    pool = pool_with(tmp_path / "pool", [0, 1])
    folder = pool.block_path(PROBLEM).parent
    (folder / "gone.tvc").write_bytes(b"TVB1")
    (folder / f"{PROBLEM}.tvc.writing").write_bytes(b"TVB1\0")
    problems = verify_ledger(pool.root).problems
    assert len(problems) == 2
    assert "no problem of problems.json has this block" in problems[0]
    assert "left by a block write that was killed" in problems[1]
    repair_ledger(pool.root)
    assert verify_ledger(pool.root).ok
    assert sorted(path.name for path in folder.iterdir()) == [f"{PROBLEM}.tvc"]


WRITE_FOREVER = """
import sys
from pathlib import Path
from tracevote.store.pool import Pool
pool = Pool(Path(sys.argv[1]))
while True:  # rewrite every block, over and over, until killed
    for problem_id in pool.problem_ids():
        pool.block_path(problem_id).unlink(missing_ok=True)
        pool.write_confidence_blocks([problem_id])
"""


def test_kill_9_while_blocks_are_written_leaves_whole_blocks_or_none(tmp_path: Path) -> None:
    problems = tuple(f"p-{i}" for i in range(4))
    pool = pool_with(tmp_path / "pool", list(range(6)), tokens=60_000, problems=problems, blocks=False)
    writer = subprocess.Popen([sys.executable, "-c", WRITE_FOREVER, str(pool.root)], cwd=REPO_ROOT,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")})
    try:
        torn = stop_mid_block(writer, [temporary(pool, problem_id) for problem_id in problems])
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    torn_problem = problems[[temporary(pool, problem_id) for problem_id in problems].index(torn)]
    assert torn.exists() and not pool.block_path(torn_problem).exists()  # killed between the open and the rename
    for problem_id in problems:
        block = pool.block_path(problem_id)
        if block.exists():  # whole: it passes every check against its log
            expected = pool.read_frames(problem_id, check_every_crc=True)
            assert confidence_block.check_block(block, pool.log_path(problem_id), expected) is None
    same(pool.read_problem(torn_problem, 6), pool.read_frames(torn_problem, 6))  # the torn file is never read
    assert f"{torn}: left by a block write that was killed" in verify_ledger(pool.root).problems
    repair_ledger(pool.root)  # removes the leftover temporary file, writes the missing blocks
    assert verify_ledger(pool.root).ok
    assert all(pool.block_path(problem_id).exists() for problem_id in problems) and not torn.exists()


def temporary(pool: Pool, problem_id: str) -> Path:
    block = pool.block_path(problem_id)
    return block.with_name(block.name + confidence_block.TEMPORARY)


def stop_mid_block(writer: subprocess.Popen, temporaries: list[Path]) -> Path:
    """Stop `writer` (SIGSTOP, waited for) at a moment one of `temporaries` exists, i.e. between a block's open and
    its rename; resumed and stopped again at the next temporary file as often as the stop lands after the rename.
    Returns the temporary file of the block it is stopped in."""
    deadline = time.monotonic() + EVENT_TIMEOUT_S
    while time.monotonic() < deadline:
        wait_for(lambda: any(path.exists() for path in temporaries) or writer.poll() is not None, "a block write")
        assert writer.poll() is None, "the block writer ended"
        os.kill(writer.pid, signal.SIGSTOP)
        os.waitpid(writer.pid, os.WUNTRACED)  # returns once it is stopped
        torn = [path for path in temporaries if path.exists()]
        if torn:
            return torn[0]
        os.kill(writer.pid, signal.SIGCONT)
    pytest.fail(f"the block writer was never stopped mid-block in {EVENT_TIMEOUT_S:g} s")


def test_a_block_is_never_written_while_a_run_appends_to_its_log(tmp_path: Path) -> None:
    """The block writer takes the log's writer lock (on a read-only descriptor, so a log DVC checked out
    read-only can still be locked): while a run holds it, writing the block is refused and nothing is left."""
    pool = pool_with(tmp_path / "pool", [0, 1], blocks=False)
    with pool.writer(PROBLEM) as writer:
        writer.append(3, codec.encode(sample(PROBLEM, 3, 40)))
        with pytest.raises(DataError, match="a run is writing this log"):
            pool.write_confidence_blocks([PROBLEM])
    assert not pool.block_path(PROBLEM).exists()
    assert pool.write_confidence_blocks([PROBLEM]) == 1  # once the run has ended
    same(pool.read_problem(PROBLEM, 4), pool.read_frames(PROBLEM))
