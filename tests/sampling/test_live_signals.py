"""The live online run on another token signal (confidence.token chosen or entropy, and deepconf at a smaller k)
stops trace by trace where the replay on the same traces sampled in full stops, the signal computed as the score
stage computes it from a pool."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.sampling.test_live import (
    GOLDS,
    MESSAGES,
    PERCENTILES,
    client_for,
    live_run,
    online_trace,
    rules,
    server,  # noqa: F401 (a fixture)
)
from tracevote.core.config_deepconf import OnlineConfig
from tracevote.deepconf.live import WindowStop
from tracevote.deepconf.online import replay, spent_tokens
from tracevote.deepconf.voting import row_percentile
from tracevote.sim.server import SimServer
from tracevote.store.records import Sample


@pytest.fixture(scope="module")
def full_traces(server: SimServer) -> dict[str, list[Sample]]:  # noqa: F811
    """Traces 0..11 of each problem sampled in full with their top-k: what a pool keeping it holds."""
    with client_for(server, 4) as client:
        return {pid: [client.sample(MESSAGES[pid], problem_id=pid, sample_id=i, keep_top_logprobs=True)
                      for i in range(12)] for pid in GOLDS}


@pytest.mark.parametrize(("token", "top_k"), [("chosen", None), ("entropy", None), ("deepconf", 5)])
def test_live_traces_stop_where_the_replay_on_the_signal_stops(tmp_path: Path, server: SimServer,  # noqa: F811
                                                               full_traces: dict[str, list[Sample]], token: str,
                                                               top_k: int | None) -> None:
    live = replace(rules(), token=token, top_k=top_k)
    runs = live_run(tmp_path, server, live, concurrency=3)
    stopped_somewhere = 0
    for name, percentile in PERCENTILES.items():
        for pid, gold in GOLDS.items():
            samples = full_traces[pid][:live.budget]
            trace = online_trace(samples, gold, token, top_k)
            sets = np.arange(live.budget)[None, :]
            threshold = row_percentile(trace.lowest[None, :live.warmup], percentile)
            spent, stopped = spent_tokens(trace, sets, threshold)
            spent[:, :live.warmup], stopped[:, :live.warmup] = trace.n_tokens[:live.warmup], False
            for i, (kept, full) in enumerate(zip(runs[name][pid], samples, strict=True)):
                where = f"{token} {name} {pid} trace {i}"
                assert kept.sample.n_tokens == spent[0, i], where
                assert (kept.stop_reason == "confidence") == stopped[0, i], where
                assert kept.sample.tokens == full.tokens[:spent[0, i]], where
            stopped_somewhere += int(stopped.sum())
            expected = replay(trace, sets, percentile, OnlineConfig(live.warmup, {name: percentile}, None), "smallest")
            assert sum(t.sample.n_tokens for t in runs[name][pid]) == expected.tokens[0]
    assert stopped_somewhere > 0, "no trace stopped: the test would prove nothing"


def test_a_rule_on_a_signal_that_can_be_negative_promises_no_count_and_stops_where_the_windows_say() -> None:
    """A C_i rule (values >= 0) may say the client can hold tokens; on chosen logprobs one token of -20 pulls a
    window below the threshold at once, so the rule promises nothing."""
    rule = WindowStop(threshold=-1.0, group_size=2, nonnegative=False)
    assert rule.feed(np.array([-0.1, -0.2], dtype=np.float32)) is None
    assert rule.safe_tokens() is None
    assert rule.feed(np.array([-20.0, -0.1], dtype=np.float32)) == 3  # window (-0.2, -20) ends at token 3
    positive = WindowStop(threshold=1.0, group_size=4)
    positive.feed(np.array([5.0, 5.0], dtype=np.float32))
    assert positive.safe_tokens() == 2  # C_i >= 0: no window falls below a sum of 4 while a 5 is in it (one spare)
