"""pass@k and avg@k (tracevote.deepconf.passk) against hand counts, lm-evaluation-harness's formulas and every working
set of small pools, and in the aggregate."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import orjson
import pytest

from tests.deepconf.test_evaluate import cfg, table
from tracevote.core.errors import ConfigError, DataError
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.passk import avg_at_k_std, pass_at_k, problem_pass_at_k
from tracevote.deepconf.results import AggregateResult

# (n, c, k, 1 - C(n-c, k)/C(n, k) counted by hand)
HAND_COUNTS = [
    (4, 1, 2, 1 - 3 / 6),  # C(3,2) = 3 of the C(4,2) = 6 pairs miss the one correct sample
    (4, 2, 2, 1 - 1 / 6),  # only the pair of the two wrong ones misses
    (4, 1, 1, 1 / 4),  # pass@1 = c/n
    (5, 2, 3, 1 - 1 / 10),  # C(3,3) = 1 of C(5,3) = 10 triples
    (6, 1, 3, 1 - 10 / 20),  # C(5,3) = 10 of C(6,3) = 20
    (4, 0, 2, 0.0),  # c = 0: no set holds a correct one
    (4, 4, 2, 1.0),  # c = n
    (4, 3, 2, 1.0),  # n - c < k: every pair holds a correct one
    (4, 1, 4, 1.0),  # k = n: the whole pool
    (4, 0, 4, 0.0),
    (1, 1, 1, 1.0),
]


@pytest.mark.parametrize(("n", "c", "k", "expected"), HAND_COUNTS)
def test_pass_at_k_against_hand_counts(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


def lm_eval_pass_at_k(n: int, c: int, k: int) -> float:
    """lm-evaluation-harness's `_pass_at_k` (lm_eval/tasks/cruxeval/utils.py at 4e7e0d47, Chen et al. 2021's
    estimator in its product form), re-implemented from its definition: 1 when n - c < k, else
    1 - prod(1 - k / i for i in n-c+1 .. n)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def exact_pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k)/C(n, k) in exact rational arithmetic."""
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


# paper-scale pools (512 and 4,096 traces) as well as small ones; the factorials of these overflow a float
GRID = [(n, c, k) for n in (1, 2, 7, 64, 512, 4096) for c in sorted({0, 1, 2, n // 3, n - 1, n}) if 0 <= c <= n
        for k in sorted({1, 2, 8, 32, n // 2, n}) if 1 <= k <= n]


@pytest.mark.parametrize(("n", "c", "k"), GRID)
def test_pass_at_k_is_lm_evaluation_harness_formula_and_the_exact_ratio(n: int, c: int, k: int) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(lm_eval_pass_at_k(n, c, k), abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(exact_pass_at_k(n, c, k), abs=1e-12)
    assert 0.0 <= pass_at_k(n, c, k) <= 1.0


def lm_eval_first_k(correct: tuple[bool, ...], k: int) -> tuple[float, float]:
    """lm-evaluation-harness's AIME pass@k and avg@k of one document (pull request #3510, lm_eval/tasks/aime/utils.py:
    `pass_at_k` scores 1 when the reference is among the first k predictions, `avg_at_k` the correct among the
    first k over k), on a pool given as each sample's correctness."""
    first = correct[:k]
    return float(any(first)), sum(first) / k


POOLS = [(True, False, False, False), (True, True, False, False, False), (False,) * 4, (True,) * 3,
         (False, True, False, True, True, False)]


@pytest.mark.parametrize("pool", POOLS)
def test_the_estimators_are_exact_means_over_every_working_set_and_every_order(pool: tuple[bool, ...]) -> None:
    n, c = len(pool), sum(pool)
    for k in range(1, n + 1):
        sets = list(itertools.combinations(pool, k))
        assert pass_at_k(n, c, k) == pytest.approx(np.mean([any(s) for s in sets]), abs=1e-12)
        means = [sum(s) / k for s in sets]
        assert problem_pass_at_k("p", np.array(pool), k).avg_at_k == pytest.approx(np.mean(means), abs=1e-12)
        assert avg_at_k_std(n, c, k) == pytest.approx(np.std(means), abs=1e-12)
        # lm-evaluation-harness's first-k scores, over every order of the samples, average to the same
        firsts = [lm_eval_first_k(order, k) for order in itertools.permutations(pool)]
        assert np.mean([p for p, _ in firsts]) == pytest.approx(pass_at_k(n, c, k), abs=1e-12)
        assert np.mean([a for _, a in firsts]) == pytest.approx(c / n, abs=1e-12)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pass_at_k(4, 1, 5), "pass@k: k=5 with a pool of n=4 samples; k must be 1 to n"),
    (lambda: pass_at_k(4, 1, 0), "pass@k: k=0 with a pool of n=4 samples; k must be 1 to n"),
    (lambda: avg_at_k_std(3, 1, 4), "pass@k: k=4 with a pool of n=3 samples; k must be 1 to n"),
    (lambda: problem_pass_at_k("aime-7", np.array([True, False, False, False]), 5),
     "eval.k: K=5 is larger than the pool of problem aime-7 (4 samples); lower eval.k or grow the pool"),
])
def test_k_above_the_pool_is_refused_in_one_line(call, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        call()
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_correct_count_outside_the_pool_is_refused() -> None:
    with pytest.raises(DataError, match=r"pass@k: 5 correct samples of 4"):
        pass_at_k(4, 5, 2)


def pools() -> AggregateResult:
    """Three problems with pools of 4: p0 one correct, p1 none, p2 three (gold 1 everywhere)."""
    rows = [("p0", 1, 1.0), ("p0", 2, 1.0), ("p0", 3, 1.0), ("p0", None, 1.0),
            ("p1", 2, 1.0), ("p1", 2, 1.0), ("p1", 3, 1.0), ("p1", 3, 1.0),
            ("p2", 1, 1.0), ("p2", 1, 1.0), ("p2", 1, 1.0), ("p2", 4, 1.0)]
    return aggregate(table(rows), cfg((1, 2, 4), repeat=4000))


def test_the_aggregate_holds_them_per_problem_and_over_problems() -> None:
    result = pools()
    at_2 = {row.problem_id: row for row in result.pass_at_k_problems if row.k == 2}
    assert [(row.samples, row.correct, row.pass_at_k) for row in at_2.values()] == [
        (4, 1, 0.5), (4, 0, 0.0), (4, 3, 1.0)]  # an invalid sample is a wrong one
    assert [row.avg_at_k for row in at_2.values()] == [0.25, 0.0, 0.75]
    summary = result.pass_at_k_at(2)
    assert summary.pass_at_k == pytest.approx(0.5) and summary.avg_at_k == pytest.approx(1 / 3)
    # one working set per problem: p0's pass is a coin of chance 0.5, p1's and p2's are certain
    assert summary.pass_at_k_std == pytest.approx(math.sqrt(0.25) / 3)
    assert summary.pass_at_k_ci_low <= summary.pass_at_k <= summary.pass_at_k_ci_high
    assert [row.k for row in result.pass_at_k] == [1, 2, 4]
    whole = result.pass_at_k_at(4)
    assert (whole.pass_at_k, whole.pass_at_k_std, whole.avg_at_k_std) == (pytest.approx(2 / 3), 0.0, 0.0)
    assert result.pass_at_k_at(1).pass_at_k == pytest.approx(result.pass_at_k_at(1).avg_at_k)


def test_the_aggregate_pass1_at_k_is_avg_at_k_on_its_drawn_working_sets() -> None:
    result = pools()
    for k in (1, 2, 4):
        exact, drawn = result.pass_at_k_at(k), result.accuracy_at("pass1", k)
        assert drawn.mean == pytest.approx(exact.avg_at_k, abs=0.01)  # 4,000 drawn sets against all of them
        assert drawn.std == pytest.approx(exact.avg_at_k_std, rel=0.05, abs=1e-12)
    assert result.accuracy_at("pass1", 4).mean == pytest.approx(result.pass_at_k_at(4).avg_at_k, abs=1e-15)  # K = n


def test_they_round_trip_through_json_and_an_older_aggregate_reads_without_them() -> None:
    result = pools()
    data = orjson.loads(orjson.dumps(result.to_json()))
    assert set(data["pass_at_k_problems"][0]) == {"problem_id", "k", "samples", "correct", "pass_at_k", "avg_at_k",
                                                  "avg_at_k_std"}
    assert AggregateResult.from_json(data) == result
    older = {key: value for key, value in data.items() if key not in ("pass_at_k", "pass_at_k_problems")}
    assert AggregateResult.from_json(older).pass_at_k_at(2) is None
