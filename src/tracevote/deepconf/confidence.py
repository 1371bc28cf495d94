"""The four trace measures of DeepConf (arXiv 2508.15260), vectorized.

A trace's measures are means of its token confidences C_i (tracevote.store.logprobs) over the trace
(avg), over its sliding windows ("groups": bottom10, lowest) and over its last tokens (tail).
Unlike the official code we keep full float64 precision (it rounds C_i and groups to 3 decimals).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from tracevote.core.config import MEASURES, ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.store.records import ProblemTraces

_BLOCK_TOKENS = 1 << 17  # tokens of C_i per block of traces in trace_measures


@dataclass(frozen=True, eq=False)
class TraceMeasures:
    """Per-trace measures, float64 [n traces]; NaN for a trace with no token that has a confidence."""

    avg: np.ndarray
    bottom10: np.ndarray
    lowest: np.ndarray
    tail: np.ndarray
    n_confident: np.ndarray  # int64 [n traces]: tokens with a confidence (the rest are skipped)

    def by_name(self, measure: str) -> np.ndarray:
        """The measure called `measure` (one of config.MEASURES)."""
        if measure not in MEASURES:
            raise KeyError(f"unknown confidence measure {measure!r} (known: {', '.join(MEASURES)})")
        return getattr(self, measure)


def trace_measures(traces: ProblemTraces, cfg: ConfidenceConfig) -> TraceMeasures:
    """avg, bottom10, lowest and tail of every trace, from `traces.token_confidence`.

    Tokens whose C_i is NaN are removed first; over the remaining m tokens of a trace:
    - avg: mean of all C_i.
    - groups: means of every full window of w = cfg.group_size consecutive tokens (stride 1);
      subtle: a trace shorter than the window has exactly one group, the mean of all its tokens.
    - bottom10: mean of the lowest max(1, floor(n_groups * cfg.bottom_fraction)) groups
      (floor as int(...) in the official code, product in float64).
    - lowest: the lowest group.
    - tail: mean of the last cfg.tail_tokens tokens, or of all of them when fewer.
    A trace with m = 0 has NaN for all four.

    Example, group_size 2, bottom_fraction 0.5, tail_tokens 2, C = [1, 3, 2, 6]:
    groups [2, 2.5, 4] -> avg 3, bottom10 2 (floor(1.5) = 1 group), lowest 2, tail 4.
    """
    confidence = np.asarray(traces.token_confidence, dtype=np.float64)
    _check_offsets(traces, len(confidence))
    offsets = np.asarray(traces.offsets, dtype=np.int64)
    # Blocks of whole traces, ~_BLOCK_TOKENS tokens each, keep the flat temporaries in cache (1.6x faster).
    block_of_trace = offsets[:-1] // _BLOCK_TOKENS
    firsts = [*np.flatnonzero(np.diff(block_of_trace, prepend=-1)).tolist(), len(traces)]
    blocks = [_block_measures(confidence[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], cfg)
              for a, b in itertools.pairwise(firsts)] or [_block_measures(confidence, offsets, cfg)]
    return TraceMeasures(*(np.concatenate(parts) for parts in zip(*blocks, strict=True)))


def _block_measures(confidence: np.ndarray, offsets: np.ndarray,
                    cfg: ConfidenceConfig) -> tuple[np.ndarray, ...]:
    """(avg, bottom10, lowest, tail, n_confident) of consecutive traces: `trace_measures` on a block."""
    kept = ~np.isnan(confidence)
    if not kept.all():
        confidence = confidence[kept]
        offsets = np.concatenate(([0], np.cumsum(kept)))[offsets]
    lengths = np.diff(offsets)
    means, prefix = _centered_prefix(confidence, lengths)
    window = np.minimum(cfg.group_size, lengths)
    groups, group_offsets = _group_means(prefix, means, offsets, lengths, window)
    return (means, _bottom_mean(groups, group_offsets, cfg.bottom_fraction), _segment_min(groups, group_offsets),
            _tail_means(prefix, means, offsets, lengths, cfg.tail_tokens), lengths.astype(np.int64))


def _check_offsets(traces: ProblemTraces, n_tokens: int) -> None:
    offsets = np.asarray(traces.offsets)
    ok = (len(offsets) == len(traces) + 1 and offsets[0] == 0 and offsets[-1] == n_tokens
          and bool(np.all(np.diff(offsets) >= 0)))
    if not ok:
        raise DataError(f"problem {traces.problem_id}: offsets {offsets[:3]}...{offsets[-2:]} do not split "
                        f"{n_tokens} tokens into {len(traces)} traces")


def _centered_prefix(values: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Trace means, and prefix sums P (length total + 1) of each value minus its trace's mean.

    Window sums are P[end] - P[start] + width * mean. Centering keeps P near zero at every trace
    boundary, so the rounding error of a window sum does not grow with its position in the flat
    array (a plain cumsum over 1.5M tokens loses ~3 digits by the end).
    """
    sums = np.zeros(len(lengths))
    nonempty = lengths > 0
    if nonempty.any():  # subtle: reduceat gives an empty segment its next value, hence only non-empty starts
        sums[nonempty] = np.add.reduceat(values, (np.cumsum(lengths) - lengths)[nonempty])
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / lengths
    prefix = np.zeros(len(values) + 1)
    np.cumsum(values - np.repeat(means, lengths), out=prefix[1:])
    return means, prefix


def _group_means(prefix: np.ndarray, means: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All sliding-window means of all traces, flat, and the offsets of each trace's groups."""
    n_groups = np.where(lengths > 0, lengths - window + 1, 0)
    group_offsets = np.concatenate(([0], np.cumsum(n_groups)))
    # group g of trace t starts at token offsets[t] + (g - group_offsets[t]): one repeat, no gathers
    starts = np.arange(group_offsets[-1]) + np.repeat(offsets[:-1] - group_offsets[:-1], n_groups)
    width = np.repeat(window, n_groups)
    sums = prefix[starts + width] - prefix[starts]
    return sums / width + np.repeat(means, n_groups), group_offsets


def _segment_min(groups: np.ndarray, group_offsets: np.ndarray) -> np.ndarray:
    """Minimum of each trace's groups; NaN for a trace without groups."""
    counts = np.diff(group_offsets)
    lowest = np.full(len(counts), np.nan)
    has_groups = counts > 0
    if has_groups.any():
        lowest[has_groups] = np.minimum.reduceat(groups, group_offsets[:-1][has_groups])
    return lowest


def _bottom_mean(groups: np.ndarray, group_offsets: np.ndarray, fraction: float) -> np.ndarray:
    """Mean of the lowest max(1, floor(n * fraction)) of each trace's n groups."""
    counts = np.diff(group_offsets)
    n_bottom = np.maximum(1, np.floor(counts * fraction)).astype(np.int64)
    bottom = _segment_min(groups, group_offsets)  # exact answer when one group is kept
    for trace in np.flatnonzero((counts > 0) & (n_bottom > 1)):
        start, k = group_offsets[trace], n_bottom[trace]
        segment = groups[start:group_offsets[trace + 1]]
        bottom[trace] = np.partition(segment, k - 1)[:k].mean()
    return bottom


def _tail_means(prefix: np.ndarray, means: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                tail_tokens: int) -> np.ndarray:
    """Mean of each trace's last min(tail_tokens, m) values; NaN for m = 0."""
    width = np.minimum(tail_tokens, lengths)
    ends = offsets[1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (prefix[ends] - prefix[ends - width]) / width + means
