"""Vote rules on working sets, vectorized over sets: row r of every (sets, K) matrix is one working set.

Answers are non-negative integers (answers 0-999, or dense codes that keep their order); NO_ANSWER
(-1) marks a sample that casts no vote. A vote returns NO_ANSWER for a set in which nobody votes (the
problem is unanswered, hence wrong), and keeps every answer that shares the top score (`top`), so a
tie rule can be applied, or scored fractionally, afterwards. Tie rules (eval.tie_break):
  smallest:   the smallest answer wins (the default);
  first:      the answer met first in the row wins (the official DeepConf code: Counter.most_common and
              max over a dict both keep insertion order);
  fractional: the prediction is the smallest answer, but `tie_credit` scores a t-way tie containing
              the gold 1/t, the expected score of a uniform random tie-break.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.core.config_deepconf import TieBreak
from tracevote.store.records import NO_ANSWER


@dataclass(frozen=True, eq=False)
class Vote:
    prediction: np.ndarray  # int64 [sets]: the winning answer under the tie rule, NO_ANSWER if nobody votes
    top: np.ndarray  # bool [sets, answers]: answers sharing the top score (all False if nobody votes)

    @property
    def tied(self) -> np.ndarray:
        """bool [sets]: the top score is shared by two or more answers."""
        return self.top.sum(axis=1) > 1


def majority_vote(answers: np.ndarray, tie_break: TieBreak = "smallest") -> Vote:
    """Cons@K: the most frequent answer of each row, ties broken by `tie_break`.

    >>> vote = majority_vote(np.array([[3, 5, 5, -1], [7, 2, -1, -1], [-1, -1, -1, -1]]))
    >>> vote.prediction.tolist(), vote.tied.tolist()
    ([5, 2, -1], [False, True, False])
    >>> majority_vote(np.array([[7, 2, -1, -1]]), "first").prediction.tolist()
    [7]
    """
    votes = answers >= 0
    counts = _per_answer(answers, votes, None)
    return _winner(answers, votes, counts, counts > 0, tie_break)


def weighted_vote(answers: np.ndarray, weights: np.ndarray, tie_break: TieBreak = "smallest") -> Vote:
    """Measure@K: per row, argmax over answers a of the sum of weights of samples answering a.

    Samples with answer NO_ANSWER or a NaN weight cast no vote. Only answers someone voted for can
    win (an answer with weight total 0 beats no one it should not); ties broken by `tie_break`.
    Weights are summed in row order, as a Python loop over the working set would.

    >>> weighted_vote(np.array([[4, 9, 9, 4]]), np.array([[3.0, 1.0, 1.5, np.nan]])).prediction.tolist()
    [4]
    """
    votes = (answers >= 0) & ~np.isnan(weights)
    totals = _per_answer(answers, votes, weights)
    voted = _per_answer(answers, votes, None) > 0
    return _winner(answers, votes, totals, voted, tie_break)


def tie_credit(vote: Vote, gold: int) -> np.ndarray:
    """float [sets]: 1/t when the gold answer is one of the t answers sharing the top score, else 0.

    >>> tie_credit(majority_vote(np.array([[1, 2, 3, 3], [1, 2, 3, -1]])), gold=2).tolist()
    [0.0, 0.3333333333333333]
    """
    if gold < 0 or gold >= vote.top.shape[1]:
        return np.zeros(len(vote.top))
    size = vote.top.sum(axis=1)
    return np.where(vote.top[:, gold], 1.0 / np.maximum(size, 1), 0.0)


def _winner(answers: np.ndarray, votes: np.ndarray, scores: np.ndarray, voted: np.ndarray,
            tie_break: TieBreak) -> Vote:
    """The answers with the top score among voted ones, and the one the tie rule picks."""
    scores = np.where(voted, scores, -np.inf)
    best = scores.max(axis=1, initial=-np.inf)
    top = voted & (scores == best[:, None])
    if tie_break == "first":
        rank = np.where(top, _first_positions(answers, votes, top.shape[1]), np.iinfo(np.int64).max)
    else:  # smallest, and fractional (which scores the tie, not the prediction)
        rank = np.where(top, 0, 1)
    prediction = np.where(top.any(axis=1), rank.argmin(axis=1), NO_ANSWER)
    return Vote(prediction=prediction.astype(np.int64), top=top)


def _first_positions(answers: np.ndarray, votes: np.ndarray, n_answers: int) -> np.ndarray:
    """int64 [sets, n_answers]: the first position in the row of a vote for each answer (K if none)."""
    n_sets, k = answers.shape
    positions = np.broadcast_to(np.arange(k), answers.shape)
    rows = np.broadcast_to(np.arange(n_sets)[:, None], answers.shape)
    first = np.full(n_sets * n_answers, k, dtype=np.int64)
    np.minimum.at(first, (rows * n_answers + answers)[votes], positions[votes])
    return first.reshape(n_sets, n_answers)


def top_eta(weights: np.ndarray, eta: float) -> np.ndarray:
    """Keep mask [sets, K] of the top-η filter: weight >= the row's 100·(1-η) percentile.

    The percentile is numpy's default (linear interpolation) over the row's non-NaN weights and is
    recomputed for every row; samples tied at the cutoff are kept (the official rule), so more than
    η·K samples can survive. NaN weights are never kept.

    >>> top_eta(np.array([[1.0, 2.0, 2.0, 3.0, np.nan]]), 0.5).tolist()
    [[False, True, True, True, False]]
    """
    return top_etas(weights, (eta,))[0]


def top_etas(weights: np.ndarray, etas: tuple[float, ...]) -> list[np.ndarray]:
    """`top_eta` for each of `etas`, sorting the rows once."""
    cutoffs = row_percentiles(weights, tuple(100 * (1 - eta) for eta in etas))
    with np.errstate(invalid="ignore"):
        return [weights >= cutoff[:, None] for cutoff in cutoffs]


def row_percentile(values: np.ndarray, q: float) -> np.ndarray:
    """Per row, np.percentile(row[~isnan(row)], q) bit for bit (method 'linear'); NaN for an all-NaN row.

    np.nanpercentile(axis=1) loops over rows in Python; this sorts once and interpolates for all
    rows with numpy's own formula: index (n-1)·q/100, then numpy's two-sided lerp.
    """
    return row_percentiles(values, (q,))[0]


def row_percentiles(values: np.ndarray, qs: tuple[float, ...]) -> list[np.ndarray]:
    """`row_percentile` at each of `qs`, sorting the rows once."""
    ordered = np.sort(values, axis=1)  # NaN sorts last
    counts = (~np.isnan(values)).sum(axis=1)
    rows = np.arange(len(values))
    return [_interpolated(ordered, counts, rows, q) for q in qs]


def _interpolated(ordered: np.ndarray, counts: np.ndarray, rows: np.ndarray, q: float) -> np.ndarray:
    quantile = np.true_divide(q, 100)
    virtual = (counts - 1) * quantile
    below = np.floor(virtual)
    at_top = virtual >= counts - 1
    lower = np.where(at_top, counts - 1, below).clip(0).astype(np.intp)
    upper = np.where(at_top, counts - 1, below + 1).clip(0).astype(np.intp)
    result = _lerp(ordered[rows, lower], ordered[rows, upper], virtual - below)
    return np.where(counts > 0, result, np.nan)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's percentile interpolation: a + (b-a)·t, computed from b's side when t >= 0.5."""
    diff = b - a
    with np.errstate(invalid="ignore"):
        return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def _per_answer(answers: np.ndarray, votes: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """[sets, n answers] counts (weights None) or weight totals of the voting samples per answer."""
    n_sets = answers.shape[0]
    n_answers = int(answers.max(initial=NO_ANSWER)) + 1
    rows = np.broadcast_to(np.arange(n_sets)[:, None], answers.shape)
    index = (rows * n_answers + answers)[votes]
    chosen = None if weights is None else weights[votes]
    totals = np.bincount(index, weights=chosen, minlength=n_sets * max(n_answers, 1))
    return totals.reshape(n_sets, max(n_answers, 1))
