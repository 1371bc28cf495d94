"""What a live online DeepConf run follows (tracevote.sampling.live): its rules, read from params.yaml once, and
the settings its ledgers are stored under (the warmup's, shared by every method, and each live method's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracevote.core.config import Params
from tracevote.store.live import LiveTrace, method_setting, warmup_setting
from tracevote.store.pool import Setting
from tracevote.store.token_signals import trace_signal

# answer codes (-1: none) of one problem's traces, given in trace order
CodesFn = Callable[[str, list[LiveTrace]], np.ndarray]


@dataclass(frozen=True)
class LiveRules:
    """What decides where a live run's traces stop and how many start."""

    warmup: int
    budget: int
    percentiles: dict[str, float]  # the live methods: name -> percentile
    group_size: int  # confidence.group_size: the window
    consensus: float | None
    max_tokens: int
    token: str = "deepconf"  # confidence.token: the per-token signal the windows average
    top_k: int | None = None  # confidence.top_k

    @property
    def keeps_top(self) -> bool:
        """Whether the streams keep their top-k: the signal is computed from it (else C_i or the chosen logprobs)."""
        return self.token == "entropy" or (self.token == "deepconf" and self.top_k is not None)

    def signal(self, token_logprobs: np.ndarray, top: np.ndarray | None, confidence: np.ndarray) -> np.ndarray:
        """The per-token signal of tokens, as the score stage reads it from a pool (store.token_signals)."""
        return trace_signal(self.token, self.top_k, token_logprobs, top, confidence)


WARMUP = "warmup"


def live_rules(params: Params) -> LiveRules:
    online = params.online
    return LiveRules(warmup=online.warmup, budget=online.live.budget,
                     percentiles={name: online.percentiles[name] for name in online.live.methods},
                     group_size=params.confidence.group_size, consensus=online.consensus,
                     max_tokens=params.decoding.max_tokens, token=params.confidence.token,
                     top_k=params.confidence.top_k)


def ledger_settings(params: Params, rules: LiveRules) -> dict[str, dict[str, Any]]:
    """The warmup ledger's setting (WARMUP) and each live method's, by name."""
    pool = Setting.from_params(params).record()
    return {WARMUP: warmup_setting(pool)} | {
        name: method_setting(pool, percentile=percentile, group_size=rules.group_size, token=rules.token,
                             top_k=rules.top_k,
                             warmup=rules.warmup, budget=rules.budget, consensus=rules.consensus)
        for name, percentile in rules.percentiles.items()}
