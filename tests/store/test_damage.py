"""Damaged versus torn frame logs: every reader agrees, nothing is read silently, verify names it, repair keeps
every good frame; and every truncation of a log (what a kill or a power loss leaves) reads back as a prefix."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import hang_guard_s
from tests.store.test_framing_codec import make_sample
from tracevote.core.errors import DamagedLogError
from tracevote.store import codec, frame_writer, framing
from tracevote.store.calls import CallLedger, CallRecord, encode
from tracevote.store.ledger import fingerprint_of, folder_name
from tracevote.store.pool import Pool
from tracevote.store.verify import frame_check, repair_ledger, verify_ledger

SETTING = {"model": "deepseek-v4-flash", "temperature": 0.6}
PROBLEM = "p-1"
N_FRAMES = 3


def small_pool(root: Path, n_frames: int = N_FRAMES) -> Pool:
    """A real pool of `n_frames` small samples of one problem."""
    pool = Pool.open_at(root, SETTING, simulated=False)
    pool.register_digests({PROBLEM: "digest"})
    with pool.writer(PROBLEM) as writer:
        for sample_id in range(n_frames):
            writer.append(sample_id, codec.encode(make_sample(n=6, k=2, sample_id=sample_id, seed=sample_id)))
    return pool


def frame_starts(path: Path) -> list[int]:
    return [frame.offset for frame in framing.survey(path, check_every_crc=True).frames]


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def scores(pool: Pool) -> list[tuple]:
    traces = pool.read_problem(PROBLEM, 100)
    return [traces.sample_ids.tolist(), traces.token_confidence.tolist(), traces.finish_reasons]


def test_one_flipped_byte_in_frame_1_of_3_is_damage_to_every_reader(tmp_path: Path) -> None:
    pool = small_pool(tmp_path / "pool")
    log = pool.log_path(PROBLEM)
    flip(log, frame_starts(log)[1] + framing.HEADER.size + 3)  # inside frame 1's payload
    before = log.read_bytes()
    for read in (lambda: list(framing.iter_payloads(log)), lambda: list(pool.iter_samples(PROBLEM)),
                 lambda: pool.missing_samples([PROBLEM], 4), lambda: scores(pool)):
        with pytest.raises(DamagedLogError, match=r"p-1\.tvf: damaged at byte [\d,]+ .*ledger repair .*p-1\.tvf"):
            read()
    report = verify_ledger(pool.root)
    assert not report.ok and len(report.logs[0].damage) == 1 and report.logs[0].good_frames == 2
    assert log.read_bytes() == before, "reading and verifying change nothing"


def test_a_damaged_header_is_refused_by_the_writer_which_truncates_nothing(tmp_path: Path) -> None:
    pool = small_pool(tmp_path / "pool")
    log = pool.log_path(PROBLEM)
    flip(log, frame_starts(log)[1])  # frame 1's magic
    before = log.read_bytes()
    with pytest.raises(DamagedLogError, match="no frame starts there"):
        pool.writer(PROBLEM)
    with pytest.raises(DamagedLogError):
        framing.scan(log)
    assert log.read_bytes() == before, "a writer never cuts a damaged log as if its tail were torn"


def test_repair_keeps_every_good_frame_and_leaves_only_the_damaged_call_missing(tmp_path: Path) -> None:
    pool = small_pool(tmp_path / "pool", n_frames=5)
    log = pool.log_path(PROBLEM)
    whole = scores(pool)
    flip(log, frame_starts(log)[2] + framing.HEADER.size + 10)
    [repair] = repair_ledger(pool.root)
    assert repair.kept == 4 and repair.dropped_bytes > 0
    assert verify_ledger(pool.root).ok
    assert pool.missing_samples([PROBLEM], 5) == {PROBLEM: [2]}
    with pool.writer(PROBLEM) as writer:  # what the rerun does: request sample 2 again, append it
        writer.append(2, codec.encode(make_sample(n=6, k=2, sample_id=2, seed=2)))
    assert scores(pool) == whole
    assert repair_ledger(pool.root) == [], "a whole log is left alone"


def test_a_flipped_byte_anywhere_before_the_last_frame_is_never_read_silently(tmp_path: Path) -> None:
    """Exhaustive over every byte of frames 0 and 1: the scoring reader (which skips frame crcs and checks
    each block it decodes) raises or returns exactly what it returned before; the full reader always raises;
    verify always reports it."""
    pool = small_pool(tmp_path / "pool")
    log = pool.log_path(PROBLEM)
    pristine, whole = log.read_bytes(), scores(pool)
    for position in range(frame_starts(log)[2]):
        flip(log, position)
        with contextlib.suppress(DamagedLogError):
            assert scores(pool) == whole, position
        with pytest.raises(DamagedLogError):
            list(pool.iter_samples(PROBLEM))
        assert not verify_ledger(pool.root).ok, position
        log.write_bytes(pristine)


def test_a_call_frame_whose_key_disagrees_with_its_record_is_damage(tmp_path: Path) -> None:
    root = tmp_path / folder_name("deepseek-v4-flash", fingerprint_of(SETTING), simulated=False)
    ledger = CallLedger.open_at(root, SETTING, simulated=False)
    ledger.register_digests({"d1": "digest"})
    record = CallRecord(key="r0/a1", kind="debate", request_sha256="0" * 64, text="t", finish_reason="stop",
                        prompt_tokens=1, cached_prompt_tokens=0, completion_tokens=1, usd=0.0, latency_s=0.1)
    log = ledger.log_path("d1")
    with ledger.writer("d1") as writer:
        writer.append("r0/a2", encode(record))  # as a flipped key byte the crc does not cover would leave it
        writer.append("r0/a3", encode(CallRecord(**{**record.__dict__, "key": "r0/a3"})))
    with pytest.raises(DamagedLogError, match="the frame's key says 'r0/a2', its record 'r0/a1'"):
        CallLedger(root).records("d1")
    report = verify_ledger(root)
    assert report.logs[0].bad_frames and report.logs[0].good_frames == 1
    check = frame_check(CallLedger(root))
    assert [check(frame) is None for frame in framing.survey(log, check_every_crc=True).frames] == [False, True]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10_000), n_frames=st.integers(min_value=1, max_value=4))
def test_every_truncation_of_a_log_reads_back_as_a_prefix(tmp_path_factory: pytest.TempPathFactory, cut: int,
                                                          n_frames: int) -> None:
    """A kill or a power loss can only cut a log short: every cut reads as its whole frames before the cut,
    never as damage, and the next writer continues from there."""
    pool = small_pool(tmp_path_factory.mktemp("pool"), n_frames=n_frames)
    log = pool.log_path(PROBLEM)
    full = [(key, bytes(payload)) for key, payload in framing.iter_payloads(log)]
    ends = [*frame_starts(log)[1:], log.stat().st_size]
    cut = cut % (log.stat().st_size + 1)
    with open(log, "r+b") as handle:
        handle.truncate(cut)
    whole_frames = sum(end <= cut for end in ends)
    assert [(key, bytes(p)) for key, p in framing.iter_payloads(log)] == full[:whole_frames]
    assert pool.missing_samples([PROBLEM], n_frames) == (
        {PROBLEM: list(range(whole_frames, n_frames))} if whole_frames < n_frames else {})
    assert verify_ledger(pool.root).ok
    with pool.writer(PROBLEM) as writer:
        assert writer.keys == set(range(whole_frames))


def test_a_writer_fsyncs_what_it_appended_without_waiting_for_close(tmp_path: Path) -> None:
    with frame_writer.FrameWriter(tmp_path / "p.tvf") as writer:
        writer.append(0, b"payload")
        assert writer.synced.wait(timeout=hang_guard_s()), "no fsync after the append"


def test_verify_checks_the_setting_against_its_fingerprint_and_names_stray_logs(tmp_path: Path) -> None:
    pool = small_pool(tmp_path / "pool")
    (pool.root / pool.LOGS / "stray.tvf").write_bytes(b"")
    meta = pool.root / Pool.META
    meta.write_text(meta.read_text().replace('"temperature": 0.6', '"temperature": 0.7'))
    problems = verify_ledger(pool.root).problems
    assert any("fingerprint" in problem and "not its setting's" in problem for problem in problems), problems
    assert any("stray.tvf: no item" in problem for problem in problems), problems
