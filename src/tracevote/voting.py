"""Vote rules on working sets, vectorized over sets: row r of every (sets, K) matrix is one working set.

Answers are non-negative integers (answers 0-999, or dense codes that keep their order); NO_ANSWER
(-1) marks a sample that casts no vote. Every rule lets the smallest answer win a tie, and returns
NO_ANSWER for a set in which nobody votes (the problem is unanswered, hence wrong).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.records import NO_ANSWER


@dataclass(frozen=True, eq=False)
class ConsVote:
    prediction: np.ndarray  # int64 [sets]: most frequent answer, NO_ANSWER if nobody votes
    tied: np.ndarray  # bool [sets]: the top count is shared by two or more answers


def majority_vote(answers: np.ndarray) -> ConsVote:
    """Cons@K: the most frequent answer of each row; the smallest answer wins ties.

    >>> vote = majority_vote(np.array([[3, 5, 5, -1], [7, 2, -1, -1], [-1, -1, -1, -1]]))
    >>> vote.prediction.tolist(), vote.tied.tolist()
    ([5, 2, -1], [False, True, False])
    """
    counts = _per_answer(answers, answers >= 0, None)
    top = counts.max(axis=1)
    tied = (top > 0) & ((counts == top[:, None]).sum(axis=1) > 1)
    prediction = np.where(top > 0, counts.argmax(axis=1), NO_ANSWER)
    return ConsVote(prediction=prediction.astype(np.int64), tied=tied)


def weighted_vote(answers: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Measure@K: per row, argmax over answers a of the sum of weights of samples answering a.

    Samples with answer NO_ANSWER or a NaN weight cast no vote. Only answers someone voted for can
    win (an answer with weight total 0 beats no one it should not); the smallest answer wins ties.
    Weights are summed in row order, as a Python loop over the working set would.

    >>> weighted_vote(np.array([[4, 9, 9, 4]]), np.array([[3.0, 1.0, 1.5, np.nan]])).tolist()
    [4]
    """
    votes = (answers >= 0) & ~np.isnan(weights)
    totals = _per_answer(answers, votes, weights)
    voted = _per_answer(answers, votes, None) > 0
    totals = np.where(voted, totals, -np.inf)
    prediction = np.where(voted.any(axis=1), totals.argmax(axis=1), NO_ANSWER)
    return prediction.astype(np.int64)


def top_eta(weights: np.ndarray, eta: float) -> np.ndarray:
    """Keep mask [sets, K] of the top-η filter: weight >= the row's 100·(1-η) percentile.

    The percentile is numpy's default (linear interpolation) over the row's non-NaN weights and is
    recomputed for every row; samples tied at the cutoff are kept (the official rule), so more than
    η·K samples can survive. NaN weights are never kept.

    >>> top_eta(np.array([[1.0, 2.0, 2.0, 3.0, np.nan]]), 0.5).tolist()
    [[False, True, True, True, False]]
    """
    cutoff = row_percentile(weights, 100 * (1 - eta))
    with np.errstate(invalid="ignore"):
        return weights >= cutoff[:, None]


def row_percentile(values: np.ndarray, q: float) -> np.ndarray:
    """Per row, np.percentile(row[~isnan(row)], q) bit for bit (method 'linear'); NaN for an all-NaN row.

    np.nanpercentile(axis=1) loops over rows in Python; this sorts once and interpolates for all
    rows with numpy's own formula: index (n-1)·q/100, then numpy's two-sided lerp.
    """
    ordered = np.sort(values, axis=1)  # NaN sorts last
    counts = (~np.isnan(values)).sum(axis=1)
    quantile = np.true_divide(q, 100)
    virtual = (counts - 1) * quantile
    below = np.floor(virtual)
    at_top = virtual >= counts - 1
    lower = np.where(at_top, counts - 1, below).clip(0).astype(np.intp)
    upper = np.where(at_top, counts - 1, below + 1).clip(0).astype(np.intp)
    rows = np.arange(len(values))
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
