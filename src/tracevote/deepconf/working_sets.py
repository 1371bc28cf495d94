"""Working sets: which K samples of a problem each repeat votes on, drawn as tracevote.deepconf.evaluate's docstring
defines them, and how many distinct sets the draws hold.
"""

from __future__ import annotations

import numpy as np

from tracevote.core.config_deepconf import EvalConfig
from tracevote.core.errors import ConfigError
from tracevote.deepconf.results import WorkingSets


def working_sets(problem_id: str, pool_size: int, k: int, cfg: EvalConfig) -> np.ndarray:
    """int [cfg.repeat, k] sample positions (see tracevote.deepconf.evaluate's docstring), or [1, n] when k == n."""
    if k > pool_size:
        raise pool_too_small(k, problem_id, pool_size)
    if k == pool_size:
        return np.arange(pool_size)[None, :]
    seed = np.random.SeedSequence(cfg.seed, spawn_key=(k, *problem_id.encode("utf-8")))
    keys = np.random.default_rng(seed).random((cfg.repeat, pool_size))
    return smallest_keys(keys, k)


def smallest_keys(keys: np.ndarray, k: int) -> np.ndarray:
    """Per row, the positions of the k smallest keys in key order, equal keys by position:
    np.argsort(keys, axis=1, kind="stable")[:, :k], exactly, without sorting whole rows when k <= n/4.

    Keys uniform on [0, 1) (the draws) put k or more of a row below (k + 6·sqrt(k) + 36) / n but
    for a vanishing chance; only those are sorted. A row with fewer (any other keys) sorts whole rows.

    >>> smallest_keys(np.array([[0.5, 0.1, 0.5, 0.9, 0.2]]), 3).tolist()
    [[1, 4, 0]]
    """
    n = keys.shape[1]
    if 4 * k <= n:
        below = keys < (k + 6 * np.sqrt(k) + 36) / n
        if below.sum(axis=1).min() >= k:
            return _smallest_of(keys, below, k)
    return np.argsort(keys, axis=1, kind="stable")[:, :k]


def _smallest_of(keys: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """smallest_keys when every row's k smallest keys are among its `candidates` (bool, at least k a row)."""
    rows, positions = np.nonzero(candidates)  # row by row, positions ascending
    counts = candidates.sum(axis=1)
    column = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    packed = np.full((len(keys), int(counts.max())), np.inf)
    packed[rows, column] = keys[rows, positions]
    where = np.zeros(packed.shape, dtype=np.int64)
    where[rows, column] = positions
    # subtle: stable, and candidates packed in position order, so equal keys keep position order
    order = np.argsort(packed, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(where, order, axis=1)


def distinct_sets(sets: np.ndarray) -> int:
    """How many different sets of samples the rows of `sets` hold, whatever their order:
    [[0, 2], [2, 0], [1, 2]] -> 2."""
    # a set of row bytes: np.unique(axis=0) sorts rows as structured records, ~30x slower at 64 x 512
    return len({row.tobytes() for row in np.ascontiguousarray(np.sort(sets, axis=1))})


def working_set_counts(sets: list[np.ndarray], k: int) -> WorkingSets:
    """The fewest and most distinct working sets over problems at K (sets[i]: problem i's, int [S, K])."""
    counts = [distinct_sets(s) for s in sets]
    return WorkingSets(k=k, fewest=min(counts), most=max(counts))


def pool_too_small(k: int, problem_id: str, pool_size: int) -> ConfigError:
    return ConfigError(f"eval.k: K={k} is larger than the pool of problem {problem_id} ({pool_size} samples); "
                       "lower eval.k or grow the pool")
