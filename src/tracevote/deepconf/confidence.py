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

from tracevote.core.config_deepconf import MEASURES, ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.store.records import ProblemTraces

_BLOCK_TOKENS = 1 << 17  # tokens of C_i per block of traces in trace_measures
_STRIDE = 16  # every _STRIDE-th window mean samples a trace's windows for bottom10 (_lowest_sum)


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
    confidence = np.asarray(traces.token_confidence)
    if confidence.dtype != np.float32:
        confidence = confidence.astype(np.float64, copy=False)
    _check_offsets(traces, len(confidence))
    offsets = np.asarray(traces.offsets, dtype=np.int64)
    # Blocks of whole traces, ~_BLOCK_TOKENS tokens each, keep the flat temporaries in cache (1.6x faster).
    block_of_trace = offsets[:-1] // _BLOCK_TOKENS
    firsts = [*np.flatnonzero(np.diff(block_of_trace, prepend=-1)).tolist(), len(traces)]
    spans = list(itertools.pairwise(firsts))
    scratch = _Scratch.sized(max([offsets[b] - offsets[a] for a, b in spans], default=0),
                             max([b - a for a, b in spans], default=0))
    blocks = [_block_measures(confidence[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], cfg, scratch)
              for a, b in spans] or [_block_measures(confidence, offsets, cfg, scratch)]
    measures = (np.concatenate(parts) for parts in zip(*(block[:-1] for block in blocks), strict=True))
    return TraceMeasures(*measures, stops=StopProfiles.concatenate([block[-1] for block in blocks]))


@dataclass(frozen=True, eq=False)
class _Scratch:
    """Buffers every block of a problem reuses: fresh temporaries of a block's size cost a page fault per 4 KB,
    which took as long as the arithmetic."""

    prefix: np.ndarray  # float64 [tokens + traces]
    sums: np.ndarray  # float64 [tokens]
    running: np.ndarray  # float64 [tokens]
    record: np.ndarray  # bool [tokens]

    @classmethod
    def sized(cls, tokens: int, traces: int) -> _Scratch:
        return cls(np.empty(tokens + traces), np.empty(tokens), np.empty(tokens), np.empty(tokens, dtype=bool))


def _block_measures(confidence: np.ndarray, token_offsets: np.ndarray, cfg: ConfidenceConfig,
                    scratch: _Scratch) -> tuple[Any, ...]:
    """(avg, bottom10, lowest, tail, n_confident, stops) of consecutive traces: `trace_measures` on a block."""
    offsets, kept_positions = token_offsets, None
    prefix, starts = _prefix_sums(confidence, offsets, scratch)
    lengths = np.diff(offsets)
    if np.isnan(prefix[starts + lengths]).any():  # a token without a confidence: drop those, then sum again
        confidence, offsets, kept_positions = _confident(confidence, token_offsets)
        prefix, starts = _prefix_sums(confidence, offsets, scratch)
        lengths = np.diff(offsets)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = prefix[starts + lengths] / lengths
    sums, sum_offsets, lowest, bottom = _window_sums(prefix, starts, lengths, cfg, scratch)
    stops = _record_lows(sums, sum_offsets, offsets, lengths, cfg.group_size, token_offsets, kept_positions,
                         scratch)
    return (means, bottom, lowest, _tail_means(prefix, starts, lengths, cfg.tail_tokens),
            lengths.astype(np.int64), stops)


def _confident(confidence: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokens that have a confidence, their traces' offsets, and the position among all tokens of each kept
    one."""
    kept = ~np.isnan(confidence)
    return confidence[kept], np.concatenate(([0], np.cumsum(kept)))[offsets], np.flatnonzero(kept)


def _prefix_sums(values: np.ndarray, offsets: np.ndarray, scratch: _Scratch) -> tuple[np.ndarray, np.ndarray]:
    """Each trace's own prefix sums, in float64, side by side: trace j's P (P[0] = 0, P[i] the sum of its first
    i values) is prefix[starts[j]:starts[j] + length + 1], so a window sum is P[end] - P[start].

    Restarting at each trace keeps the rounding error of a window sum that of its own trace's sums, never of
    the tokens before it in the block; float32 values are summed in float64 (numpy casts as it accumulates).
    """
    starts = offsets[:-1] + np.arange(len(offsets) - 1)
    prefix = scratch.prefix[:len(values) + len(offsets) - 1]
    for start, first, end in zip(starts.tolist(), offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        prefix[start] = 0.0
        np.cumsum(values[first:end], dtype=np.float64, out=prefix[start + 1:start + 1 + end - first])
    return prefix, starts


def _record_lows(sums: np.ndarray, sum_offsets: np.ndarray, offsets: np.ndarray, lengths: np.ndarray,
                 group_size: int, token_offsets: np.ndarray, kept_positions: np.ndarray | None,
                 scratch: _Scratch) -> StopProfiles:
    """The StopProfiles of a block: record lows among the full windows of each trace (`sums` are window sums,
    each trace's running minimum beside them in scratch.running, see _window_sums).

    A record is a window whose mean is below every earlier one's. Means are sums / width, which rounding keeps
    in order but may make equal: the windows whose sum is a new low are the candidates, and of these a record
    is one whose mean is below the previous candidate's (the lowest mean before it). `offsets` split the kept
    tokens, `token_offsets` all tokens; kept_positions[i] is the position among all tokens of kept token i
    (None when every token is kept).
    """
    counts = np.diff(sum_offsets)
    record = scratch.record[:len(sums)]
    np.less(sums[1:], scratch.running[:len(sums)][:-1], out=record[1:])
    record[sum_offsets[:-1][counts > 0]] = True  # a trace's first window is a record
    record[sum_offsets[:-1][(counts > 0) & (lengths < group_size)]] = False  # no full window: no records
    chosen = np.flatnonzero(record)
    trace = np.searchsorted(sum_offsets, chosen, side="right") - 1
    value = sums[chosen] / group_size
    lower = np.ones(len(chosen), dtype=bool)
    lower[1:] = (value[1:] < value[:-1]) | (trace[1:] != trace[:-1])
    chosen, trace, value = chosen[lower], trace[lower], value[lower]
    last_token = offsets[trace] + (chosen - sum_offsets[trace]) + group_size - 1  # in the block's kept tokens
    if kept_positions is not None:
        last_token = kept_positions[last_token]
    spent = last_token - token_offsets[trace] + 1
    per_trace = np.bincount(trace, minlength=len(counts))
    return StopProfiles(offsets=np.concatenate(([0], np.cumsum(per_trace))).astype(np.int64),
                        spent=spent.astype(np.int64), value=value)


def _check_offsets(traces: ProblemTraces, n_tokens: int) -> None:
    offsets = np.asarray(traces.offsets)
    ok = (len(offsets) == len(traces) + 1 and offsets[0] == 0 and offsets[-1] == n_tokens
          and bool(np.all(np.diff(offsets) >= 0)))
    if not ok:
        raise DataError(f"problem {traces.problem_id}: offsets {offsets[:3]}...{offsets[-2:]} do not split "
                        f"{n_tokens} tokens into {len(traces)} traces")


def _window_sums(prefix: np.ndarray, starts: np.ndarray, lengths: np.ndarray, cfg: ConfidenceConfig,
                 scratch: _Scratch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The sums of all sliding windows of all traces, flat (in scratch.sums, each trace's running minimum beside
    them in scratch.running), the offsets of each trace's windows, and each trace's lowest and bottom10.

    One pass per trace over its own windows: contiguous slices of P, no index arrays. A group (window mean) is
    its sum / width, so the lowest groups are the lowest sums: lowest is the lowest sum / width, bottom10 the
    mean of the lowest max(1, floor(n * bottom_fraction)) of a trace's n sums, / width.
    """
    window = np.minimum(cfg.group_size, lengths)
    n_groups = np.where(lengths > 0, lengths - window + 1, 0)
    sum_offsets = np.concatenate(([0], np.cumsum(n_groups)))
    n_bottom = np.maximum(1, np.floor(n_groups * cfg.bottom_fraction)).astype(np.int64)
    sums, running = scratch.sums[:sum_offsets[-1]], scratch.running[:sum_offsets[-1]]
    lowest, bottom = np.full(len(lengths), np.nan), np.full(len(lengths), np.nan)
    columns = (starts, sum_offsets[:-1], n_groups, window, n_bottom)
    for trace, (start, first, count, width, k) in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        if count == 0:
            continue
        window_sums = sums[first:first + count]
        np.subtract(prefix[start + width:start + width + count], prefix[start:start + count], out=window_sums)
        np.minimum.accumulate(window_sums, out=running[first:first + count])
        lowest[trace] = running[first + count - 1] / width
        bottom[trace] = _lowest_sum(window_sums, k) / (k * width) if k > 1 else lowest[trace]
    return sums, sum_offsets, lowest, bottom


def _lowest_sum(values: np.ndarray, k: int) -> float:
    """The sum of the k lowest of `values` (NaN counts as the highest).

    Only the values at or below a threshold that at least k of them reach need partitioning: when at least k
    values are <= t, the k lowest all are. Overlapping windows make every _STRIDE-th value a fair sample, so
    twice the sample's share of k gives a threshold that nearly always holds (else all values are partitioned),
    and a partition of ~1/5 of the values: 3x faster. The sum's order differs from the full partition's, so the
    last bit may.
    """
    if len(values) >= 4 * _STRIDE:
        sample = values[::_STRIDE]
        rank = min(len(sample) - 1, 2 * k // _STRIDE + 1)
        candidates = values[values <= np.partition(sample, rank)[rank]]
        if len(candidates) >= k:
            values = candidates
    return float(np.add.reduce(np.partition(values, k - 1)[:k]))


def _tail_means(prefix: np.ndarray, starts: np.ndarray, lengths: np.ndarray, tail_tokens: int) -> np.ndarray:
    """Mean of each trace's last min(tail_tokens, m) values; NaN for m = 0."""
    width = np.minimum(tail_tokens, lengths)
    ends = starts + lengths
    with np.errstate(invalid="ignore", divide="ignore"):
        return (prefix[ends] - prefix[ends - width]) / width
