"""The aggregate's fast paths give exactly what the plain computations they replace give."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tracevote.deepconf.confidence import StopProfiles
from tracevote.deepconf.online import records_at_least
from tracevote.deepconf.stop_table import rows_by_problem
from tracevote.deepconf.working_sets import smallest_keys


@pytest.mark.parametrize("distinct", [2, 5, None])  # few distinct keys force ties at the K-th; None: random floats
@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_smallest_keys_is_a_stable_argsort_prefix(n: int, distinct: int | None) -> None:
    rng = np.random.default_rng(n)
    for _ in range(20):
        keys = rng.random((6, n)) if distinct is None else rng.integers(0, distinct, (6, n)).astype(np.float64)
        for k in range(1, n + 1):
            assert np.array_equal(smallest_keys(keys, k), np.argsort(keys, axis=1, kind="stable")[:, :k])


@pytest.mark.parametrize("k", [1, 2, 16, 63, 64, 65, 512, 1024])
def test_smallest_keys_of_draws_at_pool_scale(k: int) -> None:
    keys = np.random.default_rng(k).random((64, 4096))
    for rounded in (keys, np.round(keys, 3)):  # rounded: many ties, inside and at the edge of the k
        assert np.array_equal(smallest_keys(rounded, k), np.argsort(rounded, axis=1, kind="stable")[:, :k])


def _profiles(rng: np.random.Generator, n_traces: int, most: int = 5) -> StopProfiles:
    """0 to `most` (<= 20) records falling within each trace, values from a coarse grid so traces share values."""
    counts = rng.integers(0, most + 1, n_traces)
    values = [np.sort(rng.choice(np.arange(20) / 4, c, replace=False))[::-1] for c in counts]
    return StopProfiles(offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
                        spent=np.concatenate([np.arange(1, c + 1) for c in counts]).astype(np.int64),
                        value=np.concatenate(values) if n_traces else np.zeros(0))


@pytest.mark.parametrize("most", [0, 1, 5, 20])  # 0: no trace has a record; 20: several bisection steps
@pytest.mark.parametrize("seed", range(5))
def test_records_at_least_count_the_records_at_or_above_the_threshold(seed: int, most: int) -> None:
    rng = np.random.default_rng(seed)
    stops = _profiles(rng, 9, most)
    positions = rng.integers(0, 9, (8, 4))
    # thresholds on the grid (equal to some records), between it, beyond it, and NaN
    threshold = np.array([0.0, 1.25, 2.5, 4.75, 1.1, -1.0, 9.0, np.nan])
    counts = records_at_least(stops, positions, threshold)
    for r, i in np.ndindex(positions.shape):
        if np.isnan(threshold[r]):
            continue  # no threshold: the replay stops no trace, whatever the count
        p = positions[r, i]
        own = stops.value[stops.offsets[p]:stops.offsets[p + 1]]
        assert counts[r, i] == int(np.sum(own >= threshold[r]))


@pytest.mark.parametrize(("ids", "expected"), [
    (["a", "a", "b"], {"a": [0, 1], "b": [2]}),
    (["b", "a", "b", "c"], {"b": [0, 2], "a": [1], "c": [3]}),
    ([], {}),
])
def test_rows_by_problem(ids: list[str], expected: dict[str, list[int]]) -> None:
    for series in (pd.Series(ids, dtype=str), pd.Series(ids, dtype="category")):
        found = rows_by_problem(series)
        assert {k: np.arange(len(ids))[v].tolist() for k, v in found.items()} == expected
