"""The per-token signals a trace's four measures can average (confidence.token), all higher = surer:

- deepconf: DeepConf's token confidence C_i, minus the mean of the first k present top-k logprobs
  (store.logprobs.token_confidence: with none present, minus the chosen logprob).
- chosen: the chosen token's logprob.
- entropy: minus the entropy of the token's first k present top-k entries, sum_j p_j log p_j with p_j = e^logprob_j,
  not renormalized: each term is the paper's term of the full-vocabulary entropy, and the entries left out only add
  non-negative terms, so minus it is a lower bound of the full entropy; renormalizing would make a token whose top-k
  holds half the probability look as sure as one whose top-k holds all of it. NaN with no entry present.

A pool stores C_i at its own k exactly and the top-k quantised (store.logprobs.top_steps): deepconf at the pool's k
reads the stored C_i; every other choice is computed here from the chosen logprobs (exact) and the decoded top-k.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tracevote.core.errors import DataError
from tracevote.store import codec, framing
from tracevote.store.logprobs import SENTINEL_LOGPROB, TOP_SCALE, TOP_STEP, token_confidence, top_from_steps, top_steps

LOG_SCALE_SIGNALS = ("chosen", "entropy")  # their measures are <= 0: a vote weighs e^measure (deepconf.signals)


def needs_top(signal: str, top_k: int | None, stored_k: int | None) -> bool:
    """Whether `signal` at `top_k` must be computed from the stored top-k rather than read as the stored C_i or the
    chosen logprobs."""
    if signal == "chosen":
        return False
    if signal == "entropy":
        return True
    return top_k is not None and top_k != stored_k


def token_signal(signal: str, token_logprobs: np.ndarray, top: np.ndarray | None, top_k: int | None) -> np.ndarray:
    """The signal of each token, float64 [n], from its chosen logprobs [n] and its top-k rows [n, k] best first
    (None when none were kept); NaN where a token has none (trace_measures skips it).

    >>> token_signal("entropy", np.array([-0.5]), np.array([[np.log(0.5), np.log(0.25)]]), None).round(4).tolist()
    [-0.6931]
    """
    chosen = np.asarray(token_logprobs, dtype=np.float64)
    if signal == "chosen":
        return np.where(np.isfinite(chosen) & (chosen > SENTINEL_LOGPROB), chosen, np.nan)
    rows = None if top is None else np.asarray(top, dtype=np.float64)[:, :top_k]
    if signal == "deepconf":
        return token_confidence(rows, chosen)
    if rows is None:
        return np.full(len(chosen), np.nan)
    present = np.isfinite(rows) & (rows > SENTINEL_LOGPROB)
    terms = np.where(present, np.exp(np.where(present, rows, 0.0)) * np.where(present, rows, 0.0), 0.0)
    return np.where(present.any(axis=1), terms.sum(axis=1), np.nan)


def trace_signal(signal: str, top_k: int | None, token_logprobs: np.ndarray, top: np.ndarray | None,
                 confidence: np.ndarray) -> np.ndarray:
    """The signal of a trace's tokens as the score stage reads it from a pool holding them: its stored C_i for
    deepconf at the full width, else `token_signal` of the top-k [n, k] as a pool stores it (quantised), so a live
    run stops where the replay of its stored traces says (an already quantised top-k comes back the same)."""
    if signal == "deepconf" and (top is None or top_k is None or top_k >= np.shape(top)[1]):
        return np.asarray(confidence)
    return token_signal(signal, token_logprobs, None if top is None else as_stored(top, token_logprobs), top_k)


def as_stored(top: np.ndarray, token_logprobs: np.ndarray) -> np.ndarray:
    """The top-k rows [n, k] as a pool reads them back (store.logprobs.top_steps, then top_from_steps)."""
    arrays = top_steps(top, token_logprobs)
    return top_from_steps(arrays["top_steps"], arrays.get("top_absent"), token_logprobs, TOP_STEP, TOP_SCALE).T


def read_signals(path: str, frames: Iterable[framing.Frame], sample_ids: np.ndarray, signals: tuple[str, ...],
                 top_k: int | None) -> dict[str, np.ndarray]:
    """Each of `signals` for every token of the samples `sample_ids` (in that order, their tokens flat, as
    Pool.read_problem lays them out), from the log at `path`'s `frames`.

    Refuses (DataError, one line) a signal that needs the top-k of a sample that keeps none, or a top_k above
    the width it keeps."""
    by_id: dict[int, dict[str, np.ndarray]] = {}
    wanted = set(sample_ids.tolist())
    with_top = any(signal != "chosen" for signal in signals)  # the chosen logprobs alone skip the top block
    for frame in frames:
        sample_id, chosen, top = codec.logprob_fields(frame.payload, top=with_top)  # type: ignore[arg-type]
        if sample_id not in wanted or sample_id in by_id:
            continue
        width = None if top is None else top.shape[1]
        for signal in signals:
            _check_top(path, sample_id, signal, top_k, width)
        by_id[sample_id] = {signal: token_signal(signal, chosen, top, top_k) for signal in signals}
    missing = [i for i in sample_ids.tolist() if i not in by_id]
    if missing:
        raise DataError(f"{path}: samples {missing[:5]} scored but not found for their logprobs")
    return {signal: np.concatenate([by_id[i][signal] for i in sample_ids.tolist()] or [np.empty(0)])
            for signal in signals}


def _check_top(path: str, sample_id: int, signal: str, top_k: int | None, width: int | None) -> None:
    if signal == "chosen":
        return
    if width is None:
        raise DataError(f"{path}: sample {sample_id} keeps no top-k logprobs (pool.keep_top_logprobs: false), which "
                        f"confidence.token {signal} at confidence.top_k {top_k} needs; use confidence.token chosen, "
                        "or deepconf with top_k null")
    if top_k is not None and top_k > width:
        raise DataError(f"{path}: confidence.top_k {top_k} is above the {width} top-k logprobs sample {sample_id} "
                        f"keeps; use at most {width}, or null")
