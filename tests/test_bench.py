"""Every benchmark still runs at its quick scale and reports finite figures (timings are never asserted)."""

from __future__ import annotations

import math

import pytest

from bench.run import BENCHMARKS, run_isolated


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_and_reports_figures(name: str) -> None:
    rows = run_isolated(name, "quick")
    assert rows, f"{name} reported nothing"
    for row in rows:
        assert {"name", "value", "unit"} <= set(row)
        assert math.isfinite(row["value"]) and row["value"] >= 0, row
