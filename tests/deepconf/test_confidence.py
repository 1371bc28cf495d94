"""Token confidence C_i and the trace measures, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from tracevote.answers.extract import answer_candidates
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.deepconf.confidence import trace_measures
from tracevote.store.logprobs import token_confidence
from tracevote.store.records import ProblemTraces

NO_BOX = answer_candidates("")
NAN = float("nan")
SENTINEL = -9999.0

TOKEN_CASES = [
    # (top-k logprobs of one token, chosen logprob, expected C_i)
    ([-0.5, -1.5], -0.5, 1.0),
    ([-0.1, -0.2, -0.3], -0.1, 0.2),
    ([-0.5, NAN, -1.5], -0.5, 1.0),  # absent entries are not counted
    ([-0.5, SENTINEL, SENTINEL], -0.5, 0.5),  # DeepSeek pads unreported slots with -9999
    ([-2.0, -1e5], -2.0, 2.0),  # anything <= -9999 is a sentinel
    ([-1.0, float("-inf"), float("inf")], -1.0, 1.0),
    ([SENTINEL, SENTINEL], -0.25, 0.25),  # no top-k entry: fall back to -chosen
    ([NAN, NAN], -0.25, 0.25),
    ([NAN, NAN], NAN, NAN),  # nothing at all: no confidence, the token is skipped
    ([NAN, NAN], SENTINEL, NAN),
    ([0.0, 0.0], 0.0, 0.0),
]


@pytest.mark.parametrize(("top", "chosen", "expected"), TOKEN_CASES)
def test_token_confidence(top: list[float], chosen: float, expected: float) -> None:
    result = token_confidence(np.array([top], dtype=np.float32), np.array([chosen], dtype=np.float32))
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, [expected], rtol=1e-7)


def test_token_confidence_keeps_float64_precision() -> None:
    top = np.array([[-0.123456789, -0.987654321]], dtype=np.float64)
    assert token_confidence(top, np.array([-0.1]))[0] == pytest.approx(0.555555555, rel=1e-12)


def test_token_confidence_without_top_logprobs_uses_chosen() -> None:
    result = token_confidence(None, np.array([-0.5, SENTINEL, NAN, -0.0]))
    np.testing.assert_array_equal(result, [0.5, NAN, NAN, 0.0])


def test_token_confidence_with_no_top_slots() -> None:
    result = token_confidence(np.zeros((2, 0)), np.array([-0.5, -1.0]))
    np.testing.assert_array_equal(result, [0.5, 1.0])


def test_token_confidence_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="expected"):
        token_confidence(np.zeros((3, 2)), np.zeros(2))


def traces_of(*confidences: list[float]) -> ProblemTraces:
    lengths = [len(c) for c in confidences]
    n = len(confidences)
    return ProblemTraces(problem_id="p", sample_ids=np.arange(n), candidates=[NO_BOX] * n, finish_reasons=["stop"] * n,
                         offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
                         token_confidence=np.array([v for c in confidences for v in c], dtype=np.float64))


MEASURE_CASES = [
    # (C_i of one trace, group_size, bottom_fraction, tail_tokens, expected (avg, bottom10, lowest, tail))
    # groups of [1, 3, 2, 6] with window 2: [2, 2.5, 4]
    ([1, 3, 2, 6], 2, 0.5, 2, (3.0, 2.0, 2.0, 4.0)),  # floor(3 * 0.5) = 1 group
    ([1, 3, 2, 6], 2, 1.0, 2, (3.0, 8.5 / 3, 2.0, 4.0)),  # all 3 groups
    ([1, 3, 2, 6], 2, 0.7, 3, (3.0, 2.25, 2.0, 11 / 3)),  # floor(2.1) = 2 groups: (2 + 2.5) / 2
    ([1, 3, 2, 6], 4, 0.1, 4, (3.0, 3.0, 3.0, 3.0)),  # window = length: one group
    ([1, 3, 2, 6], 10, 0.1, 10, (3.0, 3.0, 3.0, 3.0)),  # subtle: shorter than the window, one group
    ([1, 3, 2, 6], 1, 0.5, 1, (3.0, 1.5, 1.0, 6.0)),  # window 1: groups are the tokens
    ([5], 2048, 0.1, 2048, (5.0, 5.0, 5.0, 5.0)),
    # tokens without a confidence are removed before windows are formed
    ([1, NAN, 3, NAN, 2, 6], 2, 0.5, 2, (3.0, 2.0, 2.0, 4.0)),
    ([NAN, NAN], 2, 0.1, 2, (NAN, NAN, NAN, NAN)),
    ([], 2, 0.1, 2, (NAN, NAN, NAN, NAN)),
]


@pytest.mark.parametrize(("confidence", "group_size", "fraction", "tail", "expected"), MEASURE_CASES)
def test_trace_measures(confidence: list[float], group_size: int, fraction: float, tail: int,
                        expected: tuple[float, float, float, float]) -> None:
    measures = trace_measures(traces_of(confidence), ConfidenceConfig(group_size, fraction, tail))
    got = [measures.avg[0], measures.bottom10[0], measures.lowest[0], measures.tail[0]]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_trace_measures_per_trace_in_one_problem() -> None:
    traces = traces_of([1, 3, 2, 6], [], [NAN], [4, 4], [10])
    measures = trace_measures(traces, ConfidenceConfig(2, 0.5, 2))
    np.testing.assert_allclose(measures.avg, [3, NAN, NAN, 4, 10])
    np.testing.assert_allclose(measures.lowest, [2, NAN, NAN, 4, 10])
    np.testing.assert_array_equal(measures.n_confident, [4, 0, 0, 2, 1])


def test_precision_does_not_depend_on_position_in_the_pool() -> None:
    # one small-valued trace after a million large ones: a plain cumsum would lose it
    big = np.full(1_000_000, 15.0)
    small = np.array([0.001, 0.002, 0.0015])
    measures = trace_measures(traces_of(big, small), ConfidenceConfig(1, 1 / 3, 1))
    assert measures.lowest[1] == pytest.approx(0.001, rel=1e-12)
    assert measures.tail[1] == pytest.approx(0.0015, rel=1e-12)
    assert measures.bottom10[1] == pytest.approx(0.001, rel=1e-12)


def test_offsets_must_split_the_tokens() -> None:
    traces = ProblemTraces(problem_id="aime-03", sample_ids=np.arange(2), candidates=[NO_BOX] * 2,
                           finish_reasons=["stop"] * 2, offsets=np.array([0, 2, 5]),
                           token_confidence=np.ones(4))
    with pytest.raises(DataError, match="aime-03"):
        trace_measures(traces, ConfidenceConfig(2, 0.1, 2))


def test_unknown_measure_name() -> None:
    measures = trace_measures(traces_of([1.0]), ConfidenceConfig(2, 0.1, 2))
    with pytest.raises(KeyError, match="unknown confidence measure"):
        measures.by_name("mean")
