"""Vote rules on one working set (one row), hand-computed; row_percentile against np.percentile."""

from __future__ import annotations

import numpy as np
import pytest

from tracevote.deepconf.voting import majority_vote, row_percentile, top_eta, weighted_vote
from tracevote.store.records import NO_ANSWER

NAN = float("nan")
X = NO_ANSWER

MAJORITY = [
    # (answers of one working set, expected prediction, expected tied)
    ([5], 5, False),
    ([5, 5, 3], 5, False),
    ([7, 3], 3, True),  # tie: the smallest answer wins
    ([9, 9, 2, 2, 4], 2, True),
    ([9, 9, 2, 2, 9], 9, False),
    ([X, X, 4], 4, False),  # invalid samples cast no vote
    ([X, X, 4, 6, 6], 6, False),
    ([X, X], X, False),  # nobody votes: unanswered
    ([0, 0, 999], 0, False),
]


@pytest.mark.parametrize(("answers", "prediction", "tied"), MAJORITY)
def test_majority_vote(answers: list[int], prediction: int, tied: bool) -> None:
    vote = majority_vote(np.array([answers]))
    assert (vote.prediction.tolist(), vote.tied.tolist()) == ([prediction], [tied])


WEIGHTED = [
    # (answers, weights, expected)
    ([4, 9, 9], [3.0, 1.0, 1.5], 4),
    ([4, 9, 9], [2.0, 1.0, 1.5], 9),
    ([4, 9], [2.0, 2.0], 4),  # tie: the smallest answer wins
    ([9, 4, 9, 4], [1.0, 1.5, 0.5, 0.0], 4),  # 1.5 each: tie
    ([4, 9, 9], [3.0, NAN, 1.5], 4),  # a NaN weight casts no vote
    ([4, 9], [NAN, NAN], X),  # no weight at all: unanswered
    ([X, 9], [5.0, 1.0], 9),  # an invalid sample never votes, whatever its weight
    ([7], [0.0], 7),  # a zero weight still votes for its answer...
    ([7, 3], [0.0, -1.0], 7),  # ...and answers nobody voted for (0, 1, ...) cannot win
]


@pytest.mark.parametrize(("answers", "weights", "expected"), WEIGHTED)
def test_weighted_vote(answers: list[int], weights: list[float], expected: int) -> None:
    assert weighted_vote(np.array([answers]), np.array([weights])).prediction.tolist() == [expected]


TOP_ETA = [
    # (weights, eta, expected keep mask); cutoff = np.percentile(non-NaN weights, 100 (1 - eta))
    ([1.0, 2.0, 3.0, 4.0, 5.0], 0.1, [False, False, False, False, True]),  # cutoff 4.6
    ([1.0, 2.0, 3.0, 4.0, 5.0], 0.9, [False, True, True, True, True]),  # cutoff 1.4
    ([1.0, 2.0, 3.0, 4.0, 5.0], 0.5, [False, False, True, True, True]),  # cutoff 3: kept
    ([1.0, 5.0, 5.0, 5.0], 0.1, [False, True, True, True]),  # ties at the cutoff are all kept
    ([2.0, 2.0], 0.1, [True, True]),
    ([3.0], 0.1, [True]),  # K = 1: the sample is its own cutoff
    ([1.0, NAN, 3.0, 2.0], 0.5, [False, False, True, True]),  # NaN: not counted, never kept
    ([NAN, NAN], 0.1, [False, False]),
    ([1.0, 2.0], 1.0, [True, True]),  # eta 1 keeps everything
]


@pytest.mark.parametrize(("weights", "eta", "expected"), TOP_ETA)
def test_top_eta(weights: list[float], eta: float, expected: list[bool]) -> None:
    assert top_eta(np.array([weights]), eta).tolist() == [expected]


def test_rows_are_independent_working_sets() -> None:
    answers = np.array([[1, 2, 2], [3, 3, 1], [X, X, X]])
    weights = np.array([[5.0, 1.0, 1.0], [1.0, 1.0, 3.0], [1.0, 1.0, 1.0]])
    assert majority_vote(answers).prediction.tolist() == [2, 3, X]
    assert weighted_vote(answers, weights).prediction.tolist() == [1, 1, X]


@pytest.mark.parametrize("q", [0.0, 9.999999999999998, 10.0, 50.0, 90.0, 99.0, 100.0])
def test_row_percentile_equals_numpy_bit_for_bit(q: float) -> None:
    rng = np.random.default_rng(7)
    values = rng.normal(10, 3, size=(200, 13))
    values[rng.random(values.shape) < 0.3] = NAN
    values[5] = NAN
    values[6, :] = 2.5  # all equal
    expected = [np.percentile(row[~np.isnan(row)], q) if (~np.isnan(row)).any() else NAN for row in values]
    np.testing.assert_array_equal(row_percentile(values, q), expected)
