"""The four trace measures of DeepConf (arXiv 2508.15260), vectorized.

A trace's measures are means of its token confidences C_i (tracevote.store.logprobs) over the trace
(avg), over its sliding windows ("groups": bottom10, lowest) and over its last tokens (tail).
Unlike the official code we keep full float64 precision (it rounds C_i and groups to 3 decimals).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

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
    stops: StopProfiles

    def by_name(self, measure: str) -> np.ndarray:
        """The measure called `measure` (one of config.MEASURES)."""
        if measure not in MEASURES:
            raise KeyError(f"unknown confidence measure {measure!r} (known: {', '.join(MEASURES)})")
        return getattr(self, measure)


@dataclass(frozen=True, eq=False)
class StopProfiles:
    """Where each trace would stop under online DeepConf, for any threshold: its record lows.

    Online DeepConf stops a trace at the first token whose full window of cfg.group_size confidences
    has a mean below the threshold s. That is the first window where the running minimum of the
    window means drops below s, so a trace's record lows (each window mean lower than all before it,
    in order) answer every s: the trace stops at the first record whose value is below s, having spent
    that record's `spent` tokens (its window's last token included). A trace with fewer confident
    tokens than a window has no full window and no records: it never stops early.
    """

    offsets: np.ndarray  # int64 [n traces + 1]: trace j owns records offsets[j]:offsets[j+1]
    spent: np.ndarray  # int64 [records]: tokens generated up to and including the window's last token
    value: np.ndarray  # float64 [records]: the window mean, strictly decreasing within a trace

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def within(self, lowest: float, highest: float) -> StopProfiles:
        """The records that can matter when every threshold s lies in [lowest, highest]: those below
        `highest` (s never exceeds it), of which only the first below `lowest` (any s stops there or earlier).

        Online DeepConf's threshold is a percentile of some traces' lowest-group confidences, so it lies
        between the smallest and largest of them; the score stage keeps only these records.
        """
        trace = np.repeat(np.arange(len(self)), np.diff(self.offsets))
        below_all = self.value < lowest
        earlier_below = np.zeros(len(self.value), dtype=bool)
        earlier_below[1:] = below_all[:-1] & (trace[1:] == trace[:-1])
        keep = (self.value < highest) & ~earlier_below
        counts = np.bincount(trace[keep], minlength=len(self))
        return StopProfiles(offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
                            spent=self.spent[keep], value=self.value[keep])

    @staticmethod
    def concatenate(parts: list[StopProfiles]) -> StopProfiles:
        """The profiles of consecutive blocks of traces (at least one block) as one."""
        counts = np.concatenate([np.diff(part.offsets) for part in parts])
        return StopProfiles(offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
                            spent=np.concatenate([p.spent for p in parts]),
                            value=np.concatenate([p.value for p in parts]))


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
    `stops` holds each trace's StopProfiles records, from the same windows.

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
    measures = (np.concatenate(parts) for parts in zip(*(block[:-1] for block in blocks), strict=True))
    return TraceMeasures(*measures, stops=StopProfiles.concatenate([block[-1] for block in blocks]))


def _block_measures(confidence: np.ndarray, offsets: np.ndarray,
                    cfg: ConfidenceConfig) -> tuple[Any, ...]:
    """(avg, bottom10, lowest, tail, n_confident, stops) of consecutive traces: `trace_measures` on a block."""
    kept = ~np.isnan(confidence)
    token_offsets, kept_positions = offsets, None  # kept_positions: of the kept tokens, when some are dropped
    if not kept.all():
        kept_positions = np.flatnonzero(kept)
        confidence = confidence[kept]
        offsets = np.concatenate(([0], np.cumsum(kept)))[offsets]
    lengths = np.diff(offsets)
    means, prefix = _centered_prefix(confidence, lengths)
    window = np.minimum(cfg.group_size, lengths)
    groups, group_offsets = _group_means(prefix, means, offsets, lengths, window)
    stops = _record_lows(groups, group_offsets, offsets, lengths, cfg.group_size, token_offsets, kept_positions)
    return (means, _bottom_mean(groups, group_offsets, cfg.bottom_fraction), _segment_min(groups, group_offsets),
            _tail_means(prefix, means, offsets, lengths, cfg.tail_tokens), lengths.astype(np.int64), stops)


def _record_lows(groups: np.ndarray, group_offsets: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 group_size: int, token_offsets: np.ndarray, kept_positions: np.ndarray | None) -> StopProfiles:
    """The StopProfiles of a block: record lows among the full windows of each trace.

    `offsets` split the kept tokens, `token_offsets` all tokens; kept_positions[i] is the position among
    all tokens of kept token i (None when every token is kept).
    """
    counts = np.diff(group_offsets)
    full = lengths >= group_size
    trace_of_group = np.repeat(np.arange(len(counts)), counts)
    in_full = full[trace_of_group]
    running = _running_min(groups, group_offsets, full)
    first_of_trace = np.zeros(len(groups), dtype=bool)
    first_of_trace[group_offsets[:-1][counts > 0]] = True
    previous = np.concatenate(([np.inf], running[:-1]))
    record = in_full & (first_of_trace | (groups < previous))
    chosen = np.flatnonzero(record)
    trace = trace_of_group[chosen]
    last_token = offsets[trace] + (chosen - group_offsets[trace]) + group_size - 1  # in the block's kept tokens
    if kept_positions is not None:
        last_token = kept_positions[last_token]
    spent = last_token - token_offsets[trace] + 1
    per_trace = np.bincount(trace, minlength=len(counts))
    return StopProfiles(offsets=np.concatenate(([0], np.cumsum(per_trace))).astype(np.int64),
                        spent=spent.astype(np.int64), value=groups[chosen])


def _running_min(groups: np.ndarray, group_offsets: np.ndarray, full: np.ndarray) -> np.ndarray:
    """Each group's minimum over its trace's groups so far; only traces with a full window get one (the others'
    groups are left as they are: no record is read from them).

    One accumulate per trace: a few hundred calls per problem cost less than any flat trick that resets the
    running minimum at trace boundaries (a pandas groupby-cummin took 5x longer).
    """
    running = groups.copy()
    for start, end in zip(group_offsets[:-1][full].tolist(), group_offsets[1:][full].tolist(), strict=True):
        np.minimum.accumulate(groups[start:end], out=running[start:end])
    return running


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
