"""How many distinct working sets stand behind each K: counted as drawn, never above min(eval.repeat, C(pool, K)),
and one when K is the whole pool."""

from __future__ import annotations

from math import comb

import numpy as np
import pandas as pd
import pytest

from tests.deepconf.test_evaluate import cfg, table
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.results import WorkingSets
from tracevote.deepconf.working_sets import distinct_sets, working_sets


def pools_table(pools: dict[str, int]) -> pd.DataFrame:
    """Problems with the given pool sizes, answers alternating 1 and 2, confidences all different."""
    return table([(problem, 1 + i % 2, 1.0 + i) for problem, n in pools.items() for i in range(n)])


def derived_count(n: int, k: int, repeat: int) -> int:
    """min(repeat, C(n, k)), for a case where the draws reach it all but surely (the test refuses any other)."""
    sets = comb(n, k)
    # C <= repeat: every set drawn, each missed by all draws with chance (1 - 1/C)^repeat;
    # C > repeat: no two draws alike, each pair of draws being one set with chance 1/C
    miss = sets * (1 - 1 / sets) ** repeat if sets <= repeat else comb(repeat, 2) / sets
    assert miss < 1e-6, f"pool {n}, K={k}, {repeat} repeats: min(repeat, C(n, K)) is not near-certain ({miss:.1e})"
    return min(repeat, sets)


DISTINCT = [
    # (working sets as rows, distinct sets)
    ([[0, 2], [2, 0], [1, 2]], 2),  # order within a set does not matter
    ([[0, 1, 2]], 1),  # the whole pool, once
    ([[3], [3], [3]], 1),
    ([[0, 1], [1, 2], [0, 2]], 3),
]


@pytest.mark.parametrize(("rows", "expected"), DISTINCT)
def test_distinct_sets_ignore_order_and_count_repeats_once(rows: list[list[int]], expected: int) -> None:
    assert distinct_sets(np.array(rows)) == expected


COUNTS = [
    # (pool size, K, eval.repeat)
    (8, 8, 16),  # K is the whole pool: C(8, 8) = 1 set, used once
    (512, 512, 64),  # the default pool at the default headline K
    (8, 3, 1),  # one repeat: one set at every K
    (4, 3, 64),  # C(4, 3) = 4 sets and 64 draws: all four
    (6, 1, 128),  # C(6, 1) = 6
    (64, 8, 16),  # C(64, 8) ~ 4.4e9: 16 different sets
]


@pytest.mark.parametrize(("n", "k", "repeat"), COUNTS)
def test_the_count_is_min_of_repeat_and_the_sets_the_pool_holds(n: int, k: int, repeat: int) -> None:
    expected = derived_count(n, k, repeat)
    result = aggregate(pools_table({"p": n, "q": n}), cfg((k,), repeat=repeat))
    assert result.working_sets_at(k) == WorkingSets(k=k, fewest=expected, most=expected)
    assert result.working_sets_at(k).no_trace_spread == (expected == 1)


COLLIDING = [
    # (pool size, K, eval.repeat): fewer sets than repeats, so some repeats draw a set again
    (5, 2, 40),  # C = 10
    (16, 15, 32),  # C = 16
    (7, 3, 50),  # C = 35
]


@pytest.mark.parametrize(("n", "k", "repeat"), COLLIDING)
def test_repeats_drawing_the_same_set_count_it_once(n: int, k: int, repeat: int) -> None:
    drawn = {frozenset(row.tolist()) for row in working_sets("p", n, k, cfg((k,), repeat=repeat))}
    result = aggregate(pools_table({"p": n}), cfg((k,), repeat=repeat))
    assert result.working_sets_at(k).fewest == len(drawn) <= comb(n, k) < repeat


def test_a_problem_whose_pool_is_k_has_one_set_beside_others_with_many() -> None:
    result = aggregate(pools_table({"a": 3, "b": 5}), cfg((3,), repeat=256))
    assert result.working_sets_at(3) == WorkingSets(k=3, fewest=1, most=derived_count(5, 3, 256))
    assert not result.working_sets_at(3).no_trace_spread
