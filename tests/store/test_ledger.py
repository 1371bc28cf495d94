"""The ledger: keyed frames, call records, replay checks, and pools as ledgers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.errors import DataError
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.prompts import build_messages
from tracevote.sim.model import SimModel
from tracevote.store import calls, codec, frame_writer, framing
from tracevote.store.calls import Call, CallLedger, CallRecord
from tracevote.store.ledger import Ledger, fingerprint_of, folder_name
from tracevote.store.pool import Pool

SETTING = {"model": "deepseek-v4-flash", "temperature": 0.3, "agents": 4}


def record(key: str = "r0/a1", text: str = "The answer is \\boxed{25}.") -> CallRecord:
    return CallRecord(key=key, kind="solve", request_sha256="ab" * 32, text=text, finish_reason="stop",
                      prompt_tokens=120, cached_prompt_tokens=64, completion_tokens=900, usd=0.000261,
                      latency_s=3.25)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=400)
keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@given(key=keys, text=texts, cached=st.integers(0, 10_000), usd=st.floats(0, 100))
def test_call_record_round_trip(key: str, text: str, cached: int, usd: float) -> None:
    original = CallRecord(key=key, kind="rank", request_sha256="0" * 64, text=text, finish_reason="length",
                          prompt_tokens=10_000, cached_prompt_tokens=cached, completion_tokens=3, usd=usd,
                          latency_s=0.5)
    assert calls.decode(calls.encode(original)) == original


@pytest.mark.parametrize(("payload", "message"), [
    (b"TV", "too short"),
    (b"XXXX\x00\x00\x00\x00", "unknown magic"),
])
def test_bad_call_payloads_are_named(payload: bytes, message: str) -> None:
    with pytest.raises(DataError, match=message):
        calls.decode(payload)


def test_text_and_integer_keys_share_a_log_and_survive_a_torn_tail(tmp_path: Path) -> None:
    log = tmp_path / "p.tvf"
    with frame_writer.FrameWriter(log) as writer:
        writer.append(0, b"sample zero")
        writer.append("r0/agent1", b"a debate turn")
        writer.append("rank", b"a ranking")
    with open(log, "r+b") as handle:  # a kill in the middle of the last frame's write
        handle.truncate(os.path.getsize(log) - 3)
    assert [(key, bytes(p)) for key, p in framing.iter_payloads(log)] == [(0, b"sample zero"),
                                                                         ("r0/agent1", b"a debate turn")]
    frames = framing.scan(log)
    assert [f.key for f in frames] == [0, "r0/agent1"]
    with frame_writer.FrameWriter(log) as writer:
        assert writer.torn_bytes > 0 and writer.keys == {0, "r0/agent1"}
        writer.append("rank", b"a ranking")
    assert [key for key, _ in framing.iter_payloads(log)] == [0, "r0/agent1", "rank"]


@pytest.mark.parametrize("key", ["", "x" * 1025])
def test_call_keys_must_fit(tmp_path: Path, key: str) -> None:
    with frame_writer.FrameWriter(tmp_path / "p.tvf") as writer, pytest.raises(ValueError, match="call key"):
        writer.append(key, b"payload")


def open_ledger(tmp_path: Path, setting: dict | None = None, simulated: bool = False) -> CallLedger:
    setting = setting or SETTING
    root = tmp_path / "debate" / folder_name("deepseek-v4-flash", fingerprint_of(setting), simulated=simulated)
    return CallLedger.open_at(root, setting, simulated=simulated)


def test_a_ledger_stores_records_and_replays_only_the_request_it_answered(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path)
    call = Call("aime-01", "r0/a1", "solve", [{"role": "user", "content": "Find x."}])
    stored = CallRecord(**{**record().__dict__, "request_sha256": call.request_sha256})
    with ledger.writer("aime-01") as writer:
        writer.append(call.key, calls.encode(stored))
    reopened = CallLedger(ledger.root)
    assert reopened.stored_keys("aime-01") == {"r0/a1"}
    assert reopened.load(call) == stored
    assert reopened.missing({"aime-01": ["r0/a1", "r0/a2"], "aime-02": ["r0/a1"]}) == {
        "aime-01": ["r0/a2"], "aime-02": ["r0/a1"]}
    changed = Call("aime-01", "r0/a1", "solve", [{"role": "user", "content": "Find y."}])
    with pytest.raises(DataError, match="answered another request"):
        reopened.load(changed)


def test_the_setting_names_the_ledger_and_a_changed_item_is_refused(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path)
    ledger.register_digests({"aime-01": "d1"})
    ledger.register_digests({"aime-01": "d1", "aime-02": "d2"})
    assert ledger.item_ids() == ["aime-01", "aime-02"]
    with pytest.raises(DataError, match="aime-01: its input differs"):
        ledger.register_digests({"aime-01": "changed"})
    other = open_ledger(tmp_path, {**SETTING, "temperature": 0.7})
    assert other.root != ledger.root
    with pytest.raises(DataError, match="does not match"):
        CallLedger.open_at(ledger.root, {**SETTING, "temperature": 0.7}, simulated=False)


def test_simulated_ledgers_say_so_and_are_named_for_the_simulator(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path, simulated=True)
    assert ledger.simulated and ledger.root.name.startswith("simulated-")
    assert CallLedger(ledger.root).simulated


def test_a_pool_of_the_first_format_is_a_ledger() -> None:
    pool = Pool(FIXTURES / "pool_v1")
    assert isinstance(pool, Ledger)
    ids = pool.problem_ids()
    assert ids and all(pool.stored_keys(pid) == pool.stored_ids(pid) for pid in ids)
    assert all(isinstance(key, int) for key in pool.stored_keys(ids[0]))


def test_a_pool_is_not_a_call_ledger(tmp_path: Path) -> None:
    pool_root = FIXTURES / "pool_v1"
    with pytest.raises(DataError, match="not a callledger"):
        CallLedger(pool_root)


def test_traces_in_the_ledger_keep_under_48_bytes_a_token_with_top_20(tmp_path: Path) -> None:
    model = SimModel(SimConfig(seed=3, signal=1.0, accuracy=0.45, mean_tokens=1500))
    request = {"model": "tracevote-sim", "messages": build_messages("Find x if $2x = 6$.", system=None),
               "temperature": 0.6, "max_tokens": 6000, "logprobs": True, "top_logprobs": 20}
    ledger = Pool.open_at(tmp_path / "pool", SETTING, simulated=True)
    tokens = 0
    with ledger.writer("p-1") as writer:
        for sample_id in range(16):
            body = model.complete_bytes(request, f"p-1/{sample_id}")
            sample = parse_completion(body, problem_id="p-1", sample_id=sample_id, latency_s=0.0,
                                      keep_top_logprobs=True, expect_top_logprobs=20)
            writer.append(sample_id, codec.encode(sample))
            tokens += sample.n_tokens
    assert tokens > 16 * 500
    assert ledger.log_path("p-1").stat().st_size / tokens <= 48.0
