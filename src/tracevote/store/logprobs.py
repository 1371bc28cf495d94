"""Log-probabilities as stored: absent values made NaN, and each token's confidence C_i (DeepConf's).

C_i is computed once, at ingestion, in float64 from the logprobs as parsed, and stored beside the trace;
every method reads it from there.
"""

from __future__ import annotations

import numpy as np

# DeepSeek fills top-k slots it does not report with -9999; such values, and non-finite ones, are absent.
SENTINEL_LOGPROB = -9999.0
_ROWS_PER_CHUNK = 1 << 13  # top-k rows handled at a time: bounded memory, stays in cache


def clean_logprobs(values: np.ndarray) -> np.ndarray:
    """Sentinel (<= -9999) and non-finite logprobs become NaN: [-0.1, -9999, inf] -> [-0.1, nan, nan]."""
    values = np.asarray(values, dtype=np.float32)
    return np.where(np.isfinite(values) & (values > SENTINEL_LOGPROB), values, np.float32(np.nan))


def token_confidence(top_logprobs: np.ndarray | None, token_logprobs: np.ndarray) -> np.ndarray:
    """C_i per token, float64 [n]: minus the mean of the present top-k logprobs at token i.

    A top-k entry is absent when it is NaN, non-finite or a sentinel (<= -9999). With no present
    entry (or `top_logprobs` None) C_i = -token_logprobs[i]; if that is absent too, C_i is NaN and
    the token is skipped by `trace_measures`. Entries are summed in float64, in column order.

    >>> token_confidence(np.array([[-0.5, -1.5], [np.nan, -9999.0], [np.nan, np.nan]]),
    ...                  np.array([-0.5, -0.25, np.nan]))
    array([1.  , 0.25,  nan])
    """
    chosen = np.asarray(token_logprobs, dtype=np.float64)
    if top_logprobs is None:
        return -_present(chosen)
    top = np.asarray(top_logprobs)
    if top.ndim != 2 or len(top) != len(chosen):
        raise ValueError(f"top_logprobs has shape {top.shape}, expected ({len(chosen)}, k)")
    confidence = np.empty(len(top), dtype=np.float64)
    for start in range(0, len(top), _ROWS_PER_CHUNK):
        rows = slice(start, start + _ROWS_PER_CHUNK)
        confidence[rows] = _minus_row_mean(top[rows])
    missing = np.flatnonzero(np.isnan(confidence))
    confidence[missing] = -_present(chosen[missing])
    return confidence


def _present(values: np.ndarray) -> np.ndarray:
    """`values` with sentinels and non-finite entries replaced by NaN."""
    return np.where(np.isfinite(values) & (values > SENTINEL_LOGPROB), values, np.nan)


def _minus_row_mean(top: np.ndarray) -> np.ndarray:
    """-mean of each row's present entries, summed in float64 in column order; NaN for a row with none."""
    columns = np.array(top.T, dtype=np.float64, order="C")  # reducing over axis 0 is fast vector adds
    absent = ~(columns > SENTINEL_LOGPROB)  # NaN, -inf and sentinels
    absent |= columns == np.inf
    columns[absent] = 0.0
    totals = np.add.reduce(columns, axis=0)
    # counting bytes is ~10x faster than counting into int64; top-k never nears 255 slots
    n_absent = np.add.reduce(absent.view(np.uint8), axis=0, dtype=np.uint8 if len(columns) < 256 else np.int64)
    counts = len(columns) - n_absent.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, -totals / counts, np.nan)
