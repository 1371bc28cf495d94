"""Tie rules (eval.tie_break) on Cons@K and weighted votes, and the simulator's tie-rule neutrality."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.core.config_endpoints import SimConfig
from tracevote.deepconf.evaluate import aggregate, split_problems, vote_sets
from tracevote.deepconf.voting import majority_vote, tie_credit, weighted_vote
from tracevote.sim.model import SimModel

X = -1

# Row of answers (codes) in working-set order, the gold, then per rule: (prediction, score).
# fractional predicts like smallest; its score is 1/t for a t-way tie holding the gold.
TIES = [
    # 2-way tie 5 vs 3, 5 met first
    ([5, 3, 5, 3], 3, {"smallest": (3, 1.0), "first": (5, 0.0), "fractional": (3, 0.5)}),
    ([5, 3, 5, 3], 5, {"smallest": (3, 0.0), "first": (5, 1.0), "fractional": (3, 0.5)}),
    ([5, 3, 5, 3], 7, {"smallest": (3, 0.0), "first": (5, 0.0), "fractional": (3, 0.0)}),  # gold not in the tie
    # 3-way tie 8, 2, 6 (8 first), and a non-voting sample
    ([8, 2, X, 6], 6, {"smallest": (2, 0.0), "first": (8, 0.0), "fractional": (2, 1 / 3)}),
    ([8, 2, X, 6], 2, {"smallest": (2, 1.0), "first": (8, 0.0), "fractional": (2, 1 / 3)}),
    ([8, 2, X, 6], 4, {"smallest": (2, 0.0), "first": (8, 0.0), "fractional": (2, 0.0)}),
    # no tie: every rule agrees
    ([4, 9, 9, 1], 9, {"smallest": (9, 1.0), "first": (9, 1.0), "fractional": (9, 1.0)}),
]
CASES = [(row, gold, rule, *expected) for row, gold, by_rule in TIES for rule, expected in by_rule.items()]


def score(prediction: int, credit: float, gold: int, rule: str) -> float:
    return credit if rule == "fractional" else float(prediction == gold)


@pytest.mark.parametrize(("row", "gold", "rule", "prediction", "expected"), CASES)
def test_majority_vote_tie_rules(row: list[int], gold: int, rule: str, prediction: int, expected: float) -> None:
    vote = majority_vote(np.array([row]), rule)  # type: ignore[arg-type]
    assert vote.prediction.tolist() == [prediction]
    assert score(prediction, float(tie_credit(vote, gold)[0]), gold, rule) == pytest.approx(expected)


@pytest.mark.parametrize(("row", "gold", "rule", "prediction", "expected"), CASES)
def test_weighted_vote_tie_rules(row: list[int], gold: int, rule: str, prediction: int, expected: float) -> None:
    # weights 0.5 and 1.5 per answer pair sum alike (exact in binary), so the counts' ties stay ties
    answers = np.array([row + row])
    weights = np.array([[0.5] * len(row) + [1.5] * len(row)])
    vote = weighted_vote(answers, weights, rule)  # type: ignore[arg-type]
    assert vote.prediction.tolist() == [prediction]
    assert score(prediction, float(tie_credit(vote, gold)[0]), gold, rule) == pytest.approx(expected)


def test_weighted_tie_needs_equal_totals() -> None:
    # 7 and 2 both have count 2, but 7's weights are larger: no tie, whatever the rule
    answers, weights = np.array([[2, 7, 2, 7]]), np.array([[1.0, 1.0, 1.0, 1.25]])
    for rule in ("smallest", "first", "fractional"):
        vote = weighted_vote(answers, weights, rule)  # type: ignore[arg-type]
        assert (vote.prediction.tolist(), vote.tied.tolist()) == ([7], [False])


def test_nobody_votes_under_every_rule() -> None:
    for rule in ("smallest", "first", "fractional"):
        vote = majority_vote(np.array([[X, X]]), rule)  # type: ignore[arg-type]
        assert vote.prediction.tolist() == [X]
        assert tie_credit(vote, 0).tolist() == [0.0]


def scores_table(rows: list[tuple[str, int, bool]]) -> pd.DataFrame:
    """(problem_id, answer, correct) -> a score table with every sample valid, boxed and weight 1."""
    return pd.DataFrame({
        "problem_id": [r[0] for r in rows], "sample_id": range(len(rows)),
        "answer": pd.array([r[1] for r in rows], dtype="Int64"), "answer_source": "boxed",
        "correct": [r[2] for r in rows], "valid": True, "n_tokens": 10, "finish_reason": "stop",
        **dict.fromkeys(MEASURES, 1.0)})


@pytest.mark.parametrize(("rule", "cons", "avg"), [("smallest", 1.0, 1.0), ("first", 0.0, 0.0),
                                                   ("fractional", 0.5, 0.5)])
def test_vote_sets_apply_the_rule_to_cons_and_weighted(rule: str, cons: float, avg: float) -> None:
    # gold 3 ties with 5 (met first), in counts and in weights
    problem = split_problems(scores_table([("p", a, a == 3) for a in (5, 3, 5, 3)]), ("avg",))[0]
    votes = vote_sets(problem, np.array([[0, 1, 2, 3]]), etas=(), measures=("avg",), tie_break=rule)  # type: ignore[arg-type]
    assert votes.methods == ("pass1", "cons", "avg")
    assert votes.correct[1:, 0].tolist() == [cons, avg]
    assert votes.fractional[1:, 0].tolist() == [0.5, 0.5]


def test_aggregate_reports_fractional_whatever_the_rule() -> None:
    table = scores_table([("p", a, a == 3) for a in (5, 3, 5, 3)])
    by_rule = {rule: aggregate(table, EvalConfig(k=(4,), repeat=2, seed=0, etas=(), tie_break=rule))
               for rule in ("smallest", "first", "fractional")}
    for rule, expected in (("smallest", 1.0), ("first", 0.0), ("fractional", 0.5)):
        cons = by_rule[rule].accuracy_at("cons", 4)
        assert (cons.mean, cons.fractional, cons.tie_rule_gain) == (expected, 0.5, expected - 0.5)


# --- the simulator: wrong answers are spread like gold answers, so smallest-wins earns nothing ----------

def aime_like_golds(n: int) -> list[int]:
    """Gold answers skewed small like AIME's (median ~220), unlike the uniform 0-999 of hash golds."""
    rng = np.random.default_rng(7)
    return [int(x) for x in np.clip(rng.lognormal(np.log(220), 0.9, size=n), 0, 999)]


def simulated_scores(n_problems: int, n_samples: int) -> pd.DataFrame:
    """A score table of boxed sim answers; sim traces are short, so none is cut off."""
    golds = aime_like_golds(n_problems)
    texts = [f"Problem {i}: find the answer." for i in range(n_problems)]
    model = SimModel(SimConfig(seed=3, signal=0.0, accuracy=0.35, mean_tokens=40), dict(zip(texts, golds, strict=True)))
    rows = []
    for text, gold in zip(texts, golds, strict=True):
        for sample in range(n_samples):
            body = model.complete({"model": "deepseek-v4-flash", "temperature": 0.6, "max_tokens": 4096,
                                   "messages": [{"role": "user", "content": text}]}, f"{text}/{sample}")
            answer = _boxed(body["choices"][0]["message"]["content"])
            rows.append((text, answer, answer == gold))
    valid = [r for r in rows if r[1] is not None]
    return scores_table(valid)


def _boxed(content: str) -> int | None:
    _head, found, tail = content.rpartition("\\boxed{")
    return int(tail.split("}", 1)[0]) if found else None


def test_simulator_smallest_and_largest_wins_agree() -> None:
    table = simulated_scores(n_problems=120, n_samples=24)
    mirrored = table.assign(answer=999 - table["answer"])  # largest-wins = smallest-wins on 999 - answer
    cfg = EvalConfig(k=(8,), repeat=64, seed=0, etas=())
    smallest = aggregate(table, cfg, ("avg",)).accuracy_at("cons", 8)
    largest = aggregate(mirrored, cfg, ("avg",)).accuracy_at("cons", 8)
    assert smallest.fractional == pytest.approx(largest.fractional)
    assert smallest.mean != smallest.fractional  # ties happen, so the test can see a tie-rule bias
    # paired on the same working sets; the old uniform distractors put smallest ~3 points ahead here
    assert abs(smallest.mean - largest.mean) < 0.015
