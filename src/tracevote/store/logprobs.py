"""Log-probabilities as stored: absent values made NaN, each token's confidence C_i (DeepConf's), and the
top-k in the quantised form the pool keeps for re-analysis (top_steps, top_from_steps, top_error_bound).

C_i is computed once, at ingestion, in float64 from the logprobs as parsed, and stored beside the trace;
every method reads it from there, never from the quantised top-k.
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
    if len(top) <= _ROWS_PER_CHUNK:  # a streamed batch of a few tokens: one call, no copy into a second array
        confidence = _minus_row_mean(top)
    else:
        confidence = np.empty(len(top), dtype=np.float64)
        for start in range(0, len(top), _ROWS_PER_CHUNK):
            rows = slice(start, start + _ROWS_PER_CHUNK)
            confidence[rows] = _minus_row_mean(top[rows])
    missing = np.isnan(confidence)
    if missing.any():
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


# The top-k as format 3 stores it (codec.py): each logprob v as its signed log-distance from the chosen token's
# logprob c, u = sign(c - v) * log(1 + |c - v| / TOP_SCALE), rounded to a multiple of TOP_STEP. Rows are best
# first, so u rises along a row: consecutive differences are small and non-negative, and cost ~7 bits each.
TOP_STEP = 2.0**-10
TOP_SCALE = 1.0  # nats: within ~1 nat of the chosen token the error is ~absolute, beyond it relative
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def top_error_bound(top: np.ndarray, token_logprobs: np.ndarray, step: float = TOP_STEP,
                    scale: float = TOP_SCALE) -> np.ndarray:
    """The most each stored top-k logprob may differ from the one given, float64 [n, k]:
    (scale + |v - c|) * (e^(step/2) - 1) + the float32 rounding of the result; c is the chosen logprob as
    stored (float32), or 0 where it is absent. With the defaults: 2^-11 nats at c, 0.0054 nats 10 nats below."""
    values = np.asarray(top, dtype=np.float64)
    distance = np.abs(_anchor(token_logprobs)[:, None] - values)
    return (scale + distance) * np.expm1(step / 2) + np.abs(values) * 2.0**-23


def top_steps(top: np.ndarray, token_logprobs: np.ndarray) -> dict[str, np.ndarray]:
    """The top-k [n, k] quantised (see TOP_STEP) as k-major zigzag differences along each row, uint16 (uint32
    when one is too large), and `top_absent`, the absent entries as packed bits, when there are any.

    >>> top_steps(np.array([[-0.5, -1.5, np.nan]]), np.array([-0.5]))["top_steps"].ravel().tolist()
    [0, 1420, 0]
    """
    values = np.asarray(top, dtype=np.float64)
    present = np.isfinite(values)
    gap = np.where(present, _anchor(token_logprobs)[:, None] - values, 0.0)
    levels = np.rint(np.sign(gap) * np.log1p(np.abs(gap) / TOP_SCALE) / TOP_STEP).astype(np.int64)
    if not present.all():  # an absent entry repeats the level before it: a step of 0, not a jump back to 0
        last = np.maximum.accumulate(np.where(present, np.arange(levels.shape[1]), -1), axis=1)
        levels = np.where(last >= 0, np.take_along_axis(levels, np.maximum(last, 0), axis=1), 0)
    steps = np.diff(levels.T, axis=0, prepend=0)
    zigzag = (steps << 1) ^ (steps >> 63)  # 0, -1, 1, -2 ... -> 0, 1, 2, 3 ...
    wide = zigzag.size > 0 and zigzag.max() >= 1 << 16
    arrays = {"top_steps": np.ascontiguousarray(zigzag.astype(np.uint32 if wide else np.uint16))}
    if not present.all():
        arrays["top_absent"] = np.packbits(~present.T)
    return arrays


def top_from_steps(steps: np.ndarray, absent: np.ndarray | None, token_logprobs: np.ndarray, step: float,
                   scale: float) -> np.ndarray:
    """The k-major float32 top-k [k, n] that `top_steps` stored (absent entries NaN)."""
    zigzag = steps.astype(np.int64)
    levels = np.cumsum((zigzag >> 1) ^ -(zigzag & 1), axis=0)
    gap = np.sign(levels) * scale * np.expm1(np.abs(levels) * step)
    values = np.clip(_anchor(token_logprobs)[None, :] - gap, -_FLOAT32_MAX, _FLOAT32_MAX).astype(np.float32)
    if absent is not None:
        values[np.unpackbits(absent, count=values.size).reshape(values.shape).view(bool)] = np.nan
    return values


def _anchor(token_logprobs: np.ndarray) -> np.ndarray:
    """The chosen logprobs as the pool stores them (float32), in float64; 0 where absent."""
    chosen = np.asarray(token_logprobs, dtype=np.float32).astype(np.float64)
    return np.where(np.isfinite(chosen), chosen, 0.0)
