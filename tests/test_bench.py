"""Every benchmark still runs at its quick scale and reports real figures (timings are never asserted)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bench import official_offline
from bench.run import BENCHMARKS, render, run_isolated
from tracevote.core.config import ConfidenceConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.store.records import ProblemTraces


@pytest.fixture(scope="module")
def quick_rows() -> dict[str, list[dict]]:
    return {name: run_isolated(name, "quick") for name in BENCHMARKS}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_and_reports_figures(quick_rows: dict[str, list[dict]], name: str) -> None:
    rows = quick_rows[name]
    assert rows, f"{name} reported nothing"
    for row in rows:
        assert {"name", "value", "unit"} <= set(row)
        assert math.isfinite(row["value"]) and row["value"] >= 0, row
        assert row["name"] in render(row)


def test_stage_benchmark_reports_the_issue_figures(quick_rows: dict[str, list[dict]]) -> None:
    rows = {row["name"]: row for row in quick_rows["bench_stage"]}
    for name in ("stage score: marginal throughput", "stage score: end-to-end throughput",
                 "baseline: official offline analysis, Python lists", "stage score vs official offline (marginal)",
                 "paper-scale projection: score + aggregate + report"):
        assert rows[name]["value"] > 0, name
    assert "goal >= 10x" in render(rows["stage score vs official offline (marginal)"])
    assert "goal < 60 s" in render(rows["paper-scale projection: score + aggregate + report"])


def test_stage_and_baseline_give_the_same_measures(quick_rows: dict[str, list[dict]]) -> None:
    rows = {row["name"]: row for row in quick_rows["bench_stage"]}
    assert rows["baseline vs stage: max relative difference of the 4 measures"]["value"] <= 1e-9


def test_arithmetic_figures_are_labelled_as_such(quick_rows: dict[str, list[dict]]) -> None:
    assert all(row["name"].startswith("arithmetic only, in memory") for row in quick_rows["bench_score"])


@pytest.mark.parametrize(("confs", "window", "bottom", "tail", "expected"), [
    ([1.0, 3.0, 2.0, 6.0], 2, 0.5, 2, (3.0, 2.0, 2.0, 4.0)),  # the trace_measures docstring example
    ([1.0, 3.0, 2.0, 6.0], 8, 0.1, 8, (3.0, 3.0, 3.0, 3.0)),  # shorter than the window: one group
    ([4.0, 1.0, 1.0, 4.0, 2.0, 2.0], 2, 0.5, 3, (14 / 6, 1.5, 1.0, 8 / 3)),  # groups 2.5 1 2.5 3 2: bottom 2
])
def test_official_baseline_table(confs: list[float], window: int, bottom: float, tail: int,
                                 expected: tuple[float, ...]) -> None:
    assert official_offline.trace_measures(confs, window, bottom, tail) == pytest.approx(expected, rel=1e-12)


def test_official_baseline_matches_trace_measures_on_random_traces() -> None:
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 400, 40)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    confidence = rng.gamma(4.0, 3.0, int(offsets[-1]))
    traces = ProblemTraces("t", np.arange(40), [], [], offsets, confidence)
    ours = trace_measures(traces, ConfidenceConfig(group_size=64, bottom_fraction=0.1, tail_tokens=96))
    theirs = np.array([official_offline.trace_measures(confidence[a:b].tolist(), 64, 0.1, 96)
                       for a, b in itertools.pairwise(offsets)])
    np.testing.assert_allclose(np.stack([ours.avg, ours.bottom10, ours.lowest, ours.tail], axis=1), theirs,
                               rtol=1e-9)
