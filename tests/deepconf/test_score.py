"""score_problem: one problem's traces -> score-table rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES
from tracevote.answers.extract import answer_candidates
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.deepconf.score import SCORE_COLUMNS, score_problem
from tracevote.store.records import ProblemTraces

NAN = float("nan")
CFG = ConfidenceConfig(group_size=2, bottom_fraction=0.1, tail_tokens=2)
ANSWERS = AnswersConfig(fallback="last_integer", truncated_fallback=False)

# (text, finish_reason, C_i of the trace, expected (answer, valid, correct)), gold 70
ROWS = [
    (r"so \boxed{70}.", "stop", [1.0, 2.0], (70, True, True)),
    (r"so \boxed{070}", "stop", [1.0], (70, True, True)),
    (r"so \boxed{71}", "stop", [1.0, 2.0, 3.0], (71, True, False)),
    ("**Answer:** 70", "stop", [2.0], (70, True, True)),  # no box: the last integer
    (r"\boxed{\frac{1}{2}}", "stop", [1.0], (None, False, False)),  # no answer: invalid, not wrong
    ("I keep thinking and", "length", [1.0, 1.0], (None, False, False)),
    (r"\boxed{70}", "stop", [], (70, False, False)),  # no tokens: invalid even with an answer
    (r"\boxed{70}", "stop", [NAN, NAN], (70, True, True)),  # valid, but without confidence
]


def problem(rows: list[tuple], problem_id: str = "aime-01") -> ProblemTraces:
    lengths = [len(row[2]) for row in rows]
    return ProblemTraces(
        problem_id=problem_id, sample_ids=np.arange(10, 10 + len(rows)),
        candidates=[answer_candidates(row[0]) for row in rows],
        finish_reasons=[row[1] for row in rows],
        offsets=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        token_confidence=np.array([c for row in rows for c in row[2]], dtype=np.float64))


@pytest.mark.parametrize(("text", "finish", "confidence", "expected"), ROWS)
def test_score_row(text: str, finish: str, confidence: list[float], expected: tuple) -> None:
    frame = score_problem(problem([(text, finish, confidence)]), gold=70, cfg=CFG, answers=ANSWERS)
    answer, valid, correct = expected
    row = frame.iloc[0]
    assert (None if pd.isna(row["answer"]) else int(row["answer"])) == answer
    assert (bool(row["valid"]), bool(row["correct"])) == (valid, correct)
    assert row["n_tokens"] == len(confidence)
    assert row["finish_reason"] == finish


def test_columns_and_types() -> None:
    frame = score_problem(problem(ROWS), gold=70, cfg=CFG, answers=ANSWERS)
    assert tuple(frame.columns) == SCORE_COLUMNS
    assert str(frame["answer"].dtype) == "Int64"
    assert frame["correct"].dtype == bool and frame["valid"].dtype == bool
    assert frame["sample_id"].tolist() == list(range(10, 10 + len(ROWS)))
    assert set(frame["problem_id"]) == {"aime-01"}
    np.testing.assert_allclose(frame["avg"], [1.5, 1, 2, 2, 1, 1, NAN, NAN])
    np.testing.assert_allclose(frame["lowest"], [1.5, 1, 1.5, 2, 1, 1, NAN, NAN])
    np.testing.assert_allclose(frame["tail"], [1.5, 1, 2.5, 2, 1, 1, NAN, NAN])


def test_answers_are_re_extracted_from_text() -> None:
    frame = score_problem(problem([(r"\boxed{12}", "stop", [1.0])]), gold=12, cfg=CFG, answers=ANSWERS)
    assert frame["answer"].tolist() == [12]


def test_mismatched_fields_name_the_problem() -> None:
    traces = problem(ROWS[:2], problem_id="aime-07")
    broken = ProblemTraces(traces.problem_id, traces.sample_ids, traces.candidates[:1], traces.finish_reasons,
                           traces.offsets, traces.token_confidence)
    with pytest.raises(DataError, match=r"aime-07.*candidates 1"):
        score_problem(broken, gold=70, cfg=CFG, answers=ANSWERS)


def test_empty_problem_has_the_columns() -> None:
    frame = score_problem(problem([]), gold=1, cfg=CFG, answers=ANSWERS)
    assert frame.empty and tuple(frame.columns) == SCORE_COLUMNS


def test_score_pool_is_the_same_with_any_number_of_workers(monkeypatch: pytest.MonkeyPatch) -> None:

    from tracevote.deepconf.score import score_pool
    from tracevote.store.pool import Pool

    pool = Pool(FIXTURES / "pool_v1")
    problems = [("p3", 6), ("p1", 104), ("p2", 42)]
    monkeypatch.setattr("tracevote.deepconf.score.BYTES_PER_WORKER", 1)  # a pool this small would run in one
    sequential = [scored.frames() for scored in score_pool(pool, problems, 3, CFG, ANSWERS, workers=1)]
    parallel = [scored.frames() for scored in score_pool(pool, problems, 3, CFG, ANSWERS, workers=2)]
    assert [scores["problem_id"].iloc[0] for scores, _ in parallel] == ["p3", "p1", "p2"]
    assert all(scores["sample_id"].tolist() == [0, 1, 2] for scores, _ in parallel)
    for (scores_a, stops_a), (scores_b, stops_b) in zip(sequential, parallel, strict=True):
        pd.testing.assert_frame_equal(scores_a, scores_b)
        pd.testing.assert_frame_equal(stops_a, stops_b)
