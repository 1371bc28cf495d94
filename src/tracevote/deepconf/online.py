"""Online DeepConf replayed on a stored pool: which traces would have stopped early, where, what that saves,
and what the vote gives, with no model call.

It follows the official `deepconf-online.py` (facebookresearch/deepconf, branch `reproduce`) on each
working set of K traces, taken in the working set's order (tracevote.deepconf.working_sets.working_sets):
- The first `online.warmup` traces run in full. The threshold s is np.percentile (linear) of their
  lowest-group confidences, at the method's percentile: 90 keeps the top 10% (DeepConf-low), 10 keeps
  90% (DeepConf-high). A warmup trace without any confidence (NaN) is left out of the percentile.
- Every later trace stops at the first token whose window of the last confidence.group_size tokens has a
  mean below s. It then spent the tokens up to and including that token (vLLM's logits processor forces
  the end of the sequence there). Windows are full windows only, so a trace shorter than one window
  never stops early. Where each trace would stop comes from the score stage's stop table.
- A trace votes only when its lowest-group confidence is >= s (this also drops the warmup traces below
  s, and short traces below s that ran in full) and it has an answer; votes are weighted by that
  confidence. Ties follow eval.tie_break (`first` is the official rule: warmup traces come first).
- Optional consensus stop (`online.consensus` = τ, the paper's adaptive sampling; the official script has
  none): after the warmup and after each later trace, once the leading answer holds a share >= τ of the
  vote weight so far, no further trace is generated.
Tokens are completion tokens; Cons@K spends every token of its K traces. Unlike the official code, C_i
and window means are not rounded to 3 decimals (as in tracevote.deepconf.confidence).
K below the warmup has no online result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.core.config_deepconf import DEFAULT_SIGNAL, OnlineConfig, TieBreak
from tracevote.deepconf.confidence import StopProfiles
from tracevote.deepconf.signals import vote_weights
from tracevote.deepconf.voting import row_percentile, tie_credit, weighted_vote


@dataclass(frozen=True, eq=False)
class OnlineTrace:
    """What online replay needs of one problem's samples, in the order of its ProblemScores."""

    codes: np.ndarray  # int64 [n]: answer codes, NO_ANSWER (-1) for samples that cannot vote
    gold_code: int
    lowest: np.ndarray  # float64 [n]: lowest-group confidence, NaN when no token had one (valid or not)
    n_tokens: np.ndarray  # int64 [n]
    stops: StopProfiles  # records of sample i at stops.offsets[i]:stops.offsets[i+1]
    signal: str = DEFAULT_SIGNAL  # confidence.token: what `lowest` averages, hence how a vote weighs it (vote_weights)


def records_at_least(stops: StopProfiles, positions: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """int [S, K]: how many records of trace positions[r, i] are >= threshold[r] (any count when it is NaN).

    A trace's records fall, so those >= s are a prefix of them: all of them when its last (lowest) is >= s,
    none when its first is below s, else the prefix ends where a bisection of every such query at once finds
    the first record below s. Only exact float comparisons of a record with s decide.
    """
    return _records_at_least(stops, stops.offsets[positions], stops.offsets[positions + 1], threshold)


def _records_at_least(stops: StopProfiles, first: np.ndarray, end: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """`records_at_least` of the traces whose records are first:end (int [S, K])."""
    if len(stops.value) == 0:
        return np.zeros(first.shape, dtype=np.int64)
    s = np.broadcast_to(threshold[:, None], first.shape)
    # clipped for a trace without records, whose count is 0 whatever its neighbours' values
    last, head, n_records = np.maximum(end - 1, 0), np.minimum(first, len(stops.value) - 1), end - first
    with np.errstate(invalid="ignore"):
        counts = np.where(stops.value[last] >= s, n_records, 0)
        inside = (n_records > 1) & (stops.value[head] >= s) & (counts == 0)
    rows = np.flatnonzero(inside)
    counts.reshape(-1)[rows] = _first_below(stops.value, first.reshape(-1)[rows] + 1, last.reshape(-1)[rows],
                                            s.reshape(-1)[rows]) - first.reshape(-1)[rows]
    return counts


def _first_below(values: np.ndarray, low: np.ndarray, high: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Per query, the first index in [low, high] whose value is below s, for falling runs whose value at `high` is."""
    low, high = low.copy(), high.copy()
    while len(low) and (low < high).any():
        middle = (low + high) // 2
        below = values[middle] < s
        high = np.where(below, middle, high)
        low = np.where(below, low, middle + 1)
    return low


@dataclass(frozen=True, eq=False)
class OnlineSets:
    """One online method on S working sets of one problem."""

    correct: np.ndarray  # float64 [S]: 0/1 under the tie rule (1/t for tie_break fractional)
    fractional: np.ndarray  # float64 [S]
    answered: np.ndarray  # float64 [S]
    tokens: np.ndarray  # float64 [S]: completion tokens spent
    generated: np.ndarray  # float64 [S]: traces started (K unless the consensus stop ended sampling)
    stopped: np.ndarray  # float64 [S]: traces stopped early by the threshold
    threshold: np.ndarray  # float64 [S]: s


def replay(trace: OnlineTrace, sets: np.ndarray, percentile: float, cfg: OnlineConfig,
           tie_break: TieBreak) -> OnlineSets:
    """Online DeepConf (see the module docstring) on working sets `sets` (int [S, K], K >= cfg.warmup)."""
    warmup = cfg.warmup
    lowest = trace.lowest[sets]
    threshold = row_percentile(lowest[:, :warmup], percentile)
    spent, stopped = spent_tokens(trace, sets, threshold)
    stopped[:, :warmup] = False
    spent[:, :warmup] = trace.n_tokens[sets[:, :warmup]]
    codes = trace.codes[sets]
    with np.errstate(invalid="ignore"):
        votes = (codes >= 0) & (lowest >= threshold[:, None])
    weights = np.where(votes, vote_weights(lowest, trace.signal), np.nan)
    generated = np.ones(sets.shape, dtype=bool)
    if cfg.consensus is not None:
        generated = _before_consensus(codes, weights, warmup, cfg.consensus)
        weights = np.where(generated, weights, np.nan)
    vote = weighted_vote(codes, weights, tie_break)
    answered = vote.prediction >= 0
    fractional = tie_credit(vote, trace.gold_code)
    correct = fractional if tie_break == "fractional" else (answered & (vote.prediction == trace.gold_code))
    return OnlineSets(correct=np.asarray(correct, dtype=np.float64), fractional=fractional,
                      answered=answered.astype(np.float64), tokens=(spent * generated).sum(axis=1).astype(np.float64),
                      generated=generated.sum(axis=1).astype(np.float64),
                      stopped=(stopped & generated).sum(axis=1).astype(np.float64), threshold=threshold)


def spent_tokens(trace: OnlineTrace, sets: np.ndarray, threshold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens each trace of each set spends under its set's threshold, and whether it stopped early.

    A trace stops at its first record low below s: the number of its records >= s indexes that record.
    """
    stops = trace.stops
    first, end = stops.offsets[sets], stops.offsets[sets + 1]
    at_least = _records_at_least(stops, first, end, threshold)
    n_records = end - first
    stopped = (at_least < n_records) & ~np.isnan(threshold)[:, None]  # no threshold (no warmup confidence): no stop
    spent = trace.n_tokens[sets]
    spent[stopped] = stops.spent[first[stopped] + at_least[stopped]]
    return spent, stopped


def _before_consensus(codes: np.ndarray, weights: np.ndarray, warmup: int, tau: float) -> np.ndarray:
    """bool [S, K]: traces generated before the leading answer's share of the vote weight reached tau.

    The share is checked after the warmup and after each later trace; sampling stops at the first check
    that reaches tau (never when no weight was cast yet).
    """
    k = codes.shape[1]
    reached = consensus_checks(codes, weights, warmup, tau)
    reached[:, -1] = True  # the budget ends sampling anyway
    last = reached.argmax(axis=1)
    return np.arange(k)[None, :] <= last[:, None]


def consensus_checks(codes: np.ndarray, weights: np.ndarray, warmup: int, tau: float) -> np.ndarray:
    """bool [S, K]: whether the check after trace i (i >= warmup - 1) finds the leading answer's share of the vote
    weight of traces 0..i at or above tau. A trace votes where its weight is a number and its code >= 0; the share
    after trace i depends on traces 0..i alone, summed in their order (so a live run deciding trace by trace
    reaches the same numbers)."""
    n_sets, k = codes.shape
    n_answers = int(codes.max(initial=-1)) + 1
    counted = ~np.isnan(weights) & (codes >= 0)
    per_answer = np.zeros((n_sets, k, max(n_answers, 1)))
    rows, columns = np.nonzero(counted)
    per_answer[rows, columns, codes[rows, columns]] = weights[rows, columns]
    running = per_answer.cumsum(axis=1)
    total = np.where(counted, weights, 0.0).cumsum(axis=1)  # in trace order, whatever the number of answers
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, running.max(axis=2) / total, 0.0)
    reached = share >= tau
    reached[:, :warmup - 1] = False  # the first check follows the warmup
    return reached
