"""Which token signals the score stage scores (confidence.token, top_k, compare_signals), and how a vote weighs them.

The configured signal's measures are the score table's avg, bottom10, lowest and tail (every vote, the stop table,
the online replay and the planner read those); with compare_signals, every other signal the pool supports gets its
own columns <signal>_<measure> (e.g. chosen_avg), read only by the AUROC table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tracevote.core.config_deepconf import DEFAULT_SIGNAL, MEASURES, TOKEN_SIGNALS, ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.store import codec
from tracevote.store.pool import Pool
from tracevote.store.records import ProblemTraces
from tracevote.store.token_signals import LOG_SCALE_SIGNALS, needs_top, read_signals


@dataclass(frozen=True)
class SignalPlan:
    """The signals one pool is scored on: `token` (the measure columns) and `others` (columns <signal>_<measure>)."""

    token: str
    top_k: int | None
    others: tuple[str, ...]
    stored_k: int | None  # the top-k width the pool keeps; None: it keeps none

    def computed(self) -> tuple[str, ...]:
        """The signals computed from the stored logprobs (the rest are the stored C_i)."""
        return tuple(s for s in (self.token, *self.others) if needs_top(s, self.top_k, self.stored_k) or s == "chosen")

    def metadata(self) -> dict[str, str]:
        """What the score table says of its signals (Parquet metadata, read back by the aggregate stage)."""
        return {"token_signal": self.token, "top_k": top_k_text(self.top_k), "stored_top_k": top_k_text(self.stored_k),
                "compared_signals": ",".join(self.others)}


def signal_columns(signal: str) -> tuple[str, ...]:
    """The score table's columns of a compared signal: chosen -> chosen_avg, chosen_bottom10, ..."""
    return tuple(f"{signal}_{measure}" for measure in MEASURES)


def plan_signals(cfg: ConfidenceConfig, stored_k: int | None, where: str) -> SignalPlan:
    """The plan for a pool whose samples keep `stored_k` top-k entries (None: none); refuses in one line (DataError)
    a configured signal the pool cannot give. Compared signals are those the pool supports."""
    _check_supported(cfg.token, cfg.top_k, stored_k, where)
    others = tuple(s for s in TOKEN_SIGNALS if s != cfg.token and cfg.compare_signals
                   and _supported(s, cfg.top_k, stored_k))
    return SignalPlan(cfg.token, cfg.top_k, others, stored_k)


def _supported(signal: str, top_k: int | None, stored_k: int | None) -> bool:
    if not needs_top(signal, top_k, stored_k):  # chosen, and deepconf at the pool's k, need no top-k
        return True
    return stored_k is not None and (top_k is None or top_k <= stored_k)


def _check_supported(signal: str, top_k: int | None, stored_k: int | None, where: str) -> None:
    if stored_k is None and needs_top(signal, top_k, stored_k):
        raise DataError(f"{where}: confidence.token {signal} with confidence.top_k {top_k_text(top_k)} needs the top-k "
                        "logprobs, which this pool does not keep (pool.keep_top_logprobs: false); use confidence.token "
                        "chosen, or deepconf with top_k null")
    if stored_k is not None and top_k is not None and top_k > stored_k:
        raise DataError(f"{where}: confidence.top_k {top_k} is above the {stored_k} top-k logprobs this pool keeps; "
                        f"use at most {stored_k}, or null")


def top_k_text(top_k: int | None) -> str:
    """A top-k setting as params.yaml and the score table's metadata spell it (None: null)."""
    return "null" if top_k is None else str(top_k)


def pool_top_width(pool: Pool, problem_id: str) -> int | None:
    """The top-k width of the problem's first stored sample (None: it keeps no top-k, or there is none)."""
    for frame in pool.frames_within(problem_id, 1 << 30, check_every_crc=False):
        _, _, top = codec.logprob_fields(frame.payload)  # type: ignore[arg-type]
        return None if top is None else int(top.shape[1])
    return None


def signal_traces(pool: Pool, traces: ProblemTraces, plan: SignalPlan) -> dict[str, ProblemTraces]:
    """`traces` once per signal of the plan, each with that signal in place of C_i (the stored C_i kept where it is
    the signal)."""
    computed, ids = plan.computed(), np.asarray(traces.sample_ids)
    n_pool = int(ids.max()) + 1 if len(ids) else 0
    values = {} if not computed else read_signals(str(pool.log_path(traces.problem_id)),
                                                  pool.frames_within(traces.problem_id, n_pool, check_every_crc=False),
                                                  ids, computed, plan.top_k)
    return {signal: replace(traces, token_confidence=values[signal]) if signal in values else traces
            for signal in (plan.token, *plan.others)}


def table_signal(metadata: dict[str, str]) -> str:
    """The token signal a score table's measures average, from its Parquet metadata (tables from before the setting
    are DeepConf's C_i)."""
    return metadata.get("token_signal", DEFAULT_SIGNAL)


def table_top_k(metadata: dict[str, str]) -> int | None:
    """The confidence.top_k a score table was scored at (None: every entry the pool kept)."""
    value = metadata.get("top_k", "null")
    return None if value == "null" else int(value)


def vote_weights(values: np.ndarray, signal: str) -> np.ndarray:
    """The weight a trace's measure gives its vote: the measure itself for deepconf (C_i > 0, DeepConf's rule),
    e^measure for chosen and entropy, whose measures are <= 0 (a sum of negative weights would favour the answers
    with fewest votes): e^avg of chosen is the geometric-mean probability of the chosen tokens. Monotone, so the
    top-eta filters keep the same traces either way."""
    return np.exp(values) if signal in LOG_SCALE_SIGNALS else values
