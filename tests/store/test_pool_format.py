"""Pools written by format 1 (confidence recomputed from float16 top-k) still read as they did."""

import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import FIXTURES
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.store import codec
from tracevote.store.pool import Pool

POOL_V1 = FIXTURES / "pool_v1"
CFG = ConfidenceConfig(group_size=16, bottom_fraction=0.1, tail_tokens=32)

# Printed by the format-1 code when it wrote the fixture (both came in with format 2, commit 9cb5ad4): even
# sample ids keep top-5, odd ones C_i only; every trace stopped. The test after the next works each number out
# again from the stored arrays and README's definitions, with none of the scoring code.
# (problem, sample, candidates, n_tokens, avg, bottom10, lowest, tail)
EXPECTED = [
    ("p1", 0, [True, 104, None], 72, 7.1993735295202965, 6.05442698314786, 5.88981152921915, 7.636544432118535),
    ("p1", 1, [True, 104, None], 42, 8.672097206115723, 7.607630491256714, 7.475819796323776, 8.955935001373291),
    ("p1", 2, [True, 104, None], 33, 9.21812081770463, 9.047841411083937, 9.047841411083937, 9.37599424123764),
    ("p1", 3, [True, 104, None], 52, 9.145848796917843, 7.333495169878005, 7.255330771207808, 7.909602254629133),
    ("p2", 0, [True, 42, None], 29, 9.004059831849458, 8.39060339704156, 8.39060339704156, 9.00405983184946),
    ("p2", 1, [True, 933, None], 71, 8.071734206777224, 6.649177488684654, 6.46844507753849, 7.547502227127553),
    ("p2", 2, [True, 42, None], 61, 8.12580424605823, 5.944689387455583, 5.723580268770457, 9.113071231171489),
    ("p2", 3, [True, 42, None], 44, 9.094651476903396, 8.172172546386719, 8.067306533455849, 9.255751729011536),
    ("p3", 0, [True, 6, None], 45, 7.757456573115454, 7.226253357281287, 7.189357554167509, 7.284303335100413),
    ("p3", 1, [True, 267, None], 37, 8.085481321489489, 7.073665805160999, 7.066313520073891, 8.299200929701328),
    ("p3", 2, [True, 500, None], 121, 5.679853237857504, 4.026767969876527, 3.7519225120544433, 5.647757433727383),
    ("p3", 3, [True, 414, None], 71, 8.473441134036428, 7.2389683574438095, 7.169012859463692, 8.858049735426903),
]


@pytest.mark.parametrize("problem_id", ["p1", "p2", "p3"])
def test_format_1_pool_reads_as_before(problem_id: str) -> None:
    traces = Pool(POOL_V1).read_problem(problem_id, 10)
    rows = [row for row in EXPECTED if row[0] == problem_id]
    measures = trace_measures(traces, CFG)
    assert traces.sample_ids.tolist() == [row[1] for row in rows]
    assert [c.to_json() for c in traces.candidates] == [row[2] for row in rows]
    assert traces.finish_reasons == ["stop"] * len(rows)
    assert np.diff(traces.offsets).tolist() == [row[3] for row in rows]
    for column, name in enumerate(("avg", "bottom10", "lowest", "tail"), start=4):
        np.testing.assert_allclose(measures.by_name(name), [row[column] for row in rows], rtol=1e-12)


def reference_confidence(top: np.ndarray | None, stored: np.ndarray | None) -> np.ndarray:
    """C_i by README's definition: -mean of the top-k (float16 in format 1, none absent here), else as stored."""
    if top is not None:
        assert np.isfinite(top).all() and (top > -9999).all()
        return -top.astype(np.float64).mean(axis=1)
    assert stored is not None
    return stored.astype(np.float64)


def reference_measures(c: np.ndarray, cfg: ConfidenceConfig) -> tuple[float, float, float, float]:
    """avg, bottom10, lowest and tail of one trace's C_i, window by window in plain float64."""
    window = cfg.group_size
    starts = range(len(c) - window + 1) if len(c) >= window else [0]  # shorter than the window: one group
    groups = sorted(float(c[i: i + window].mean()) for i in starts)
    n_bottom = max(1, math.floor(cfg.bottom_fraction * len(groups)))
    return float(c.mean()), float(np.mean(groups[:n_bottom])), groups[0], float(c[-cfg.tail_tokens:].mean())


def test_the_expected_measures_follow_from_the_fixtures_own_arrays() -> None:
    pool = Pool(POOL_V1)
    for problem_id in ("p1", "p2", "p3"):
        for sample in sorted(pool.iter_samples(problem_id), key=lambda s: s.sample_id):
            row = next(r for r in EXPECTED if r[:2] == (problem_id, sample.sample_id))
            assert (sample.top_logprobs is not None) == (sample.sample_id % 2 == 0)
            assert len(sample.tokens) == row[3] and sample.finish_reason == "stop"
            assert sample.text.endswith(f"\\boxed{{{row[2][1]}}}")
            confidence = reference_confidence(sample.top_logprobs, sample.token_confidence)
            np.testing.assert_allclose(reference_measures(confidence, CFG), row[4:], rtol=1e-9)


def test_format_1_pool_reads_only_the_samples_asked_for() -> None:
    traces = Pool(POOL_V1).read_problem("p3", 2)
    assert traces.sample_ids.tolist() == [0, 1]


def test_format_2_samples_appended_to_a_format_1_pool_read_beside_the_old_ones(tmp_path: Path) -> None:
    shutil.copytree(POOL_V1, tmp_path / "pool")
    pool = Pool(tmp_path / "pool")
    old = next(s for s in pool.iter_samples("p2") if s.sample_id == 0)
    with pool.writer("p2") as writer:
        writer.append(7, codec.encode(dataclasses.replace(old, sample_id=7)))
    traces = pool.read_problem("p2", 10)
    assert traces.sample_ids.tolist() == [0, 1, 2, 3, 7]
    assert traces.candidates[-1] == traces.candidates[0]
    first, last = (traces.token_confidence[a:b] for a, b in ((0, traces.offsets[1]), traces.offsets[-2:]))
    np.testing.assert_allclose(last, first, rtol=1e-6)  # format 1 recomputed, format 2 stored: one C_i
