"""aggregate and its parts on small hand-computed score tables."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import orjson
import pandas as pd
import pytest

from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.core.errors import ConfigError, DataError
from tracevote.deepconf.evaluate import aggregate, method_names, split_problems, vote_sets, working_sets
from tracevote.deepconf.results import AggregateResult
from tracevote.deepconf.sample_stats import auroc, average_ranks, validity_counts
from tracevote.deepconf.score import SCORE_COLUMNS

NAN = float("nan")


def table(rows: list[tuple], gold: dict[str, int] | None = None) -> pd.DataFrame:
    """Score rows from (problem_id, answer or None, confidence, n_tokens=10, finish='stop', source).

    Every measure gets the same confidence; correct = valid and answer == gold[problem] (default 1);
    the answer source defaults to 'boxed' for an answer, 'none' without one.
    """
    records = []
    for sample_id, (problem_id, answer, conf, *rest) in enumerate(rows):
        n_tokens, finish, source = (rest + [10, "stop", None][len(rest):])[:3]
        source = source or ("none" if answer is None else "boxed")
        valid = answer is not None and n_tokens > 0
        correct = valid and answer == (gold or {}).get(problem_id, 1)
        records.append({"problem_id": problem_id, "sample_id": sample_id, "answer": answer, "answer_source": source,
                        "correct": correct,
                        "valid": valid, "n_tokens": n_tokens, "finish_reason": finish,
                        **dict.fromkeys(MEASURES, conf)})
    frame = pd.DataFrame(records, columns=list(SCORE_COLUMNS))
    frame["answer"] = frame["answer"].astype("Int64")
    return frame


def cfg(k: tuple[int, ...], repeat: int = 8, etas: tuple[float, ...] = (0.1, 0.9)) -> EvalConfig:
    return EvalConfig(k=k, repeat=repeat, seed=0, etas=etas)


# One problem, whole pool (K = pool size), gold answer 1; expected accuracy per method.
WHOLE_POOL = [
    # (samples as (answer, confidence), method, expected accuracy)
    ([(1, 1.0), (2, 1.0), (2, 1.0)], "cons", 0.0),
    ([(1, 1.0), (2, 1.0), (2, 1.0)], "pass1", 1 / 3),
    ([(1, 5.0), (2, 1.0), (2, 1.0)], "avg", 1.0),  # 5 > 1 + 1
    ([(1, 2.0), (2, 1.0), (2, 1.0)], "avg", 1.0),  # weighted tie 2 = 2: the smallest answer (1) wins
    ([(3, 2.0), (1, 1.0), (1, 1.0)], "avg", 1.0),  # tie again: 1 wins, whatever the order
    ([(1, 1.0), (2, 1.0)], "cons", 1.0),  # count tie: the smallest answer wins
    ([(2, 1.0), (1, 1.0)], "cons", 1.0),
    ([(None, 1.0), (None, 1.0)], "cons", 0.0),  # all invalid: unanswered, counts as wrong
    ([(None, 1.0), (None, 1.0)], "pass1", 0.0),
    ([(None, 1.0), (None, 1.0)], "avg_top10", 0.0),
    # top-10% of [1, 2, 3, 9]: cutoff 7.2 keeps only the 9, voting 2
    ([(1, 1.0), (1, 2.0), (1, 3.0), (2, 9.0)], "avg_top10", 0.0),
    # top-90% of [1, 2, 3, 5.5]: cutoff 1.3 drops a vote for 1, so 2 (5.5) beats 1 (2 + 3)
    ([(1, 1.0), (1, 2.0), (1, 3.0), (2, 5.5)], "avg", 1.0),
    ([(1, 1.0), (1, 2.0), (1, 3.0), (2, 5.5)], "avg_top90", 0.0),
    # ties at the cutoff are kept: [1, 5, 5] -> cutoff 5 keeps both 5s
    ([(2, 1.0), (1, 5.0), (3, 5.0)], "avg_top10", 1.0),
    # a valid sample without confidence votes in Cons but not in the weighted votes
    ([(1, NAN), (1, NAN), (2, 1.0)], "cons", 1.0),
    ([(1, NAN), (1, NAN), (2, 1.0)], "avg", 0.0),
    ([(1, NAN), (1, NAN), (2, 1.0)], "avg_top90", 0.0),
    ([(1, NAN), (1, NAN)], "avg", 0.0),  # nobody can cast a weighted vote: unanswered
]


@pytest.mark.parametrize(("samples", "method", "expected"), WHOLE_POOL)
def test_whole_pool(samples: list[tuple], method: str, expected: float) -> None:
    scores = table([("p", answer, conf) for answer, conf in samples])
    result = aggregate(scores, cfg((len(samples),)))
    row = result.accuracy_at(method, len(samples))
    assert (row.mean, row.std) == (pytest.approx(expected), 0.0)


def test_k1_every_vote_is_the_sample() -> None:
    rows = [("p", a, c) for a, c in [(1, 1.0), (2, 3.0), (None, 1.0), (1, NAN), (1, 2.0)]]
    result = aggregate(table(rows), cfg((1,), repeat=32))
    pass1 = result.accuracy_at("pass1", 1)
    assert result.accuracy_at("cons", 1) == dataclasses.replace(pass1, method="cons")  # the same interval too
    # the NaN-confidence sample answers Cons@1 but not avg@1
    assert result.accuracy_at("avg", 1).mean <= pass1.mean
    assert result.ties[0].rate == 0.0


def test_whole_pool_is_deterministic_and_used_once() -> None:
    rows = [(p, a, c) for p in ("a", "b") for a, c in [(1, 1.0), (2, 2.0), (1, 3.0)]]
    result = aggregate(table(rows), cfg((3,), repeat=5))
    assert all(row.std == 0.0 for row in result.accuracy)
    np.testing.assert_array_equal(working_sets("a", 3, 3, cfg((3,))), [[0, 1, 2]])


def test_k_larger_than_a_pool_names_k_problem_and_size() -> None:
    rows = [("aime-01", 1, 1.0)] * 4 + [("aime-02", 1, 1.0)] * 3
    with pytest.raises(ConfigError, match=r"K=4 .* problem aime-02 \(3 samples\)"):
        aggregate(table(rows), cfg((2, 4)))
    with pytest.raises(ConfigError, match=r"K=5 .* problem aime-01 \(4 samples\)"):
        working_sets("aime-01", 4, 5, cfg((5,)))


def test_duplicate_method_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="same method twice"):
        method_names(("avg",), (0.1, 0.1))


def test_working_sets_are_subsets_and_reproducible() -> None:
    config = cfg((5,), repeat=50)
    sets = working_sets("aime-01", 12, 5, config)
    assert sets.shape == (50, 5)
    assert all(len(set(row)) == 5 and row.min() >= 0 and row.max() < 12 for row in sets)
    np.testing.assert_array_equal(sets, working_sets("aime-01", 12, 5, config))
    assert not np.array_equal(sets, working_sets("aime-02", 12, 5, config))
    assert not np.array_equal(sets, working_sets("aime-01", 12, 5, EvalConfig((5,), 50, 1, (0.1,))))


def test_result_does_not_depend_on_row_order() -> None:
    rng = np.random.default_rng(3)
    rows = [(f"p{i % 3}", int(rng.integers(0, 4)), float(rng.random())) for i in range(60)]
    scores = table(rows)
    config = cfg((1, 4, 20), repeat=16)
    shuffled = scores.sample(frac=1.0, random_state=5)
    assert aggregate(shuffled, config) == aggregate(scores, config)


def test_per_problem_results() -> None:
    rows = [("easy", 1, 1.0)] * 3 + [("hard", 2, 1.0), ("hard", 2, 1.0), ("hard", None, 1.0)]
    result = aggregate(table(rows), cfg((3,)))
    by_key = {(r.problem_id, r.method): r for r in result.problems}
    assert (by_key["easy", "cons"].accuracy, by_key["easy", "cons"].prediction) == (1.0, 1)
    assert (by_key["hard", "cons"].accuracy, by_key["hard", "cons"].prediction) == (0.0, 2)
    assert by_key["hard", "pass1"].prediction is None
    assert by_key["hard", "pass1"].answered == pytest.approx(2 / 3)
    assert len(result.problems) == 2 * len(result.methods)


def test_tie_rate() -> None:
    rows = [("tied", 1, 1.0), ("tied", 2, 1.0), ("clear", 1, 1.0), ("clear", 1, 1.0)]
    assert aggregate(table(rows), cfg((2,))).ties[0].rate == 0.5


VALIDITY_ROWS = [
    ("a", 1, 1.0), ("a", None, 1.0), ("a", None, 1.0, 10, "length"), ("a", 1, 1.0, 4096, "length"),
    ("b", 1, NAN), ("b", None, NAN, 0), ("b", 2, NAN, 0),
]


@pytest.mark.parametrize(("field", "expected"), [
    ("n_problems", 2), ("n_samples", 7), ("n_valid", 3), ("valid_per_problem_mean", 1.5),
    ("valid_per_problem_min", 1), ("fewest_valid_problem", "b"), ("no_tokens", 2), ("no_answer", 1), ("truncated", 1),
    ("finish_length", 2), ("unweighted", 1),
])
def test_validity_counts(field: str, expected: float) -> None:
    assert getattr(validity_counts(table(VALIDITY_ROWS)), field) == expected


@pytest.mark.parametrize(("scores", "positive", "expected"), [
    ([1.0, 2.0], [False, True], 1.0),
    ([1.0, 2.0], [True, False], 0.0),
    ([1.0, 1.0], [True, False], 0.5),  # a tie counts one half
    ([0.1, 0.4, 0.4, 0.9], [False, True, False, True], 0.875),
    ([3.0, 1.0, 2.0], [True, True, True], None),  # one class only
    ([], [], None),
])
def test_auroc(scores: list[float], positive: list[bool], expected: float | None) -> None:
    assert auroc(np.array(scores), np.array(positive, dtype=bool)) == expected


def test_average_ranks() -> None:
    np.testing.assert_array_equal(average_ranks(np.array([5.0, 1.0, 5.0, 3.0, 5.0])), [4, 1, 4, 2, 4])


def test_confidence_summaries_and_auroc_in_result() -> None:
    rows = [("a", 1, 3.0), ("a", 2, 1.0), ("a", 1, 2.0), ("a", None, 9.0), ("b", 2, 5.0), ("b", 2, 4.0)]
    result = aggregate(table(rows), cfg((2,)))
    summary = {(s.measure, s.correct): s for s in result.confidence}
    assert (summary["avg", True].count, summary["avg", True].mean) == (2, 2.5)
    assert (summary["avg", False].count, summary["avg", False].p50) == (3, 4.0)  # the invalid 9 is left out
    tail = next(a for a in result.auroc if a.measure == "tail")
    assert tail.pooled == pytest.approx(2 / 6)  # correct {3, 2} vs wrong {1, 5, 4}
    assert (tail.per_problem_mean, tail.n_problems) == (1.0, 1)  # only "a" has both classes


@pytest.mark.parametrize(("measures", "etas", "expected"), [
    (("avg",), (0.1, 0.9), ("pass1", "cons", "avg", "avg_top10", "avg_top90")),
    (("tail", "bottom10"), (0.05,), ("pass1", "cons", "tail", "tail_top5", "bottom10", "bottom10_top5")),
    (("lowest",), (), ("pass1", "cons", "lowest")),
])
def test_method_names(measures: tuple[str, ...], etas: tuple[float, ...], expected: tuple[str, ...]) -> None:
    assert method_names(measures, etas) == expected


def test_eta_must_be_a_whole_percentage() -> None:
    with pytest.raises(ConfigError, match=r"0\.125"):
        method_names(("avg",), (0.125,))


def test_vote_sets_takes_explicit_sets() -> None:
    rows = [("p", 1, 1.0), ("p", 2, 5.0), ("p", 2, 1.0), ("p", 1, 1.0)]
    problem = split_problems(table(rows))[0]
    votes = vote_sets(problem, np.array([[0, 3, 1], [1, 2, 0]]), etas=(0.1,), measures=("avg",))
    assert votes.methods == ("pass1", "cons", "avg", "avg_top10")
    np.testing.assert_array_equal(votes.prediction[1:], [[1, 2], [2, 2], [2, 2]])
    np.testing.assert_array_equal(votes.correct, [[2 / 3, 1 / 3], [1, 0], [0, 0], [0, 0]])


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda f: f.drop(columns=["tail"]), "missing column.*tail"),
    (lambda f: f.iloc[0:0], "no rows"),
    (lambda f: f.assign(correct=[True, True, False]), "problem p: correctness disagrees"),
    (lambda f: f.assign(sample_id=[0, 0, 1]), "duplicate sample_id"),
    (lambda f: f.assign(valid=[True, True, True]), "sample_id 2: 'valid' is True"),
    (lambda f: f.assign(n_tokens=[10, 0, 10]), "sample_id 1: 'valid' is True"),
    (lambda f: f.assign(correct=[True, False, True]), "correct but invalid: 1"),
])
def test_bad_tables_are_named(mutate, message: str) -> None:
    scores = table([("p", 1, 1.0), ("p", 2, 1.0), ("p", None, 1.0)])
    with pytest.raises(DataError, match=message):
        aggregate(mutate(scores), cfg((1,)))


def test_json_round_trip() -> None:
    rows = [(p, a, c) for p in ("a", "b") for a, c in [(1, 1.0), (2, NAN), (None, 2.0), (1, 3.0)]]
    result = aggregate(table(rows), cfg((1, 2, 4), repeat=4))
    text = json.dumps(result.to_json(), allow_nan=False)
    assert AggregateResult.from_json(json.loads(text)) == result
    assert AggregateResult.from_json(orjson.loads(orjson.dumps(result.to_json()))) == result  # as fileio writes
