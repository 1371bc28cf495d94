"""The comparison table's row "Cons@K (within the debate's tokens)": Cons@K at the largest K whose K traces cost no
more completion tokens per problem than the debate spent, with that K's own accuracy and cost; no row when even one
trace costs more. The expected rows are worked out here from the curve's numbers, never taken from the program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracevote.report.compare import DebatePoint, TraceTokens, VotingCurve, comparison_rows, tokens_per_trace

K = (1, 2, 4, 8, 16)
CONS = (0.11, 0.22, 0.33, 0.44, 0.55)  # a different accuracy at each K: the row must take its own K's
TOKENS_PER_TRACE = 100.0


def curve() -> VotingCurve:
    return VotingCurve(K, ("pass1", "cons"), {"pass1": (0.05,) * len(K), "cons": CONS}, TOKENS_PER_TRACE, 10)


def within_row(debate_tokens: float) -> list[dict]:
    rows = comparison_rows(curve(), DebatePoint(0.5, debate_tokens, 5.0, 10), 16, agents=4)
    return [row for row in rows if "within the debate's tokens" in row["label"]]


@pytest.mark.parametrize(("debate_tokens", "k", "accuracy_pct"), [
    (450.0, 4, 33.0),      # 4 traces cost 400, 8 would cost 800
    (800.0, 8, 44.0),      # exactly the debate's tokens is within them
    (799.9, 4, 33.0),
    (100.0, 1, 11.0),      # one trace
    (10_000.0, 16, 55.0),  # every K is affordable: the largest
])
def test_cons_within_the_debates_tokens_is_the_largest_affordable_k(debate_tokens: float, k: int,
                                                                    accuracy_pct: float) -> None:
    assert within_row(debate_tokens) == [{"method": "cons", "label": f"Cons@{k} (within the debate's tokens)",
                                          "k": k, "accuracy_pct": accuracy_pct,
                                          "completion_tokens_per_problem": k * TOKENS_PER_TRACE,
                                          "problems": 10}]  # the curve's: every vote covers the pool's problems


def test_no_within_row_when_one_trace_costs_more_than_the_debate() -> None:
    assert within_row(99.9) == []
    rows = comparison_rows(curve(), DebatePoint(0.5, 99.9, 5.0, 10), 16, agents=4)
    assert [row["method"] for row in rows] == ["pass1", "cons", "debate"]


def test_a_trace_costs_the_mean_over_problems_of_each_problems_mean_read_without_pandas(tmp_path: Path) -> None:
    """Problems with uneven trace counts, out of order: p0 (10, 20, 60) -> 30, p1 (5) -> 5, p2 (1, 2) -> 1.5; a
    trace costs (30 + 5 + 1.5) / 3, read from the score table with pyarrow alone."""
    ids, tokens = ["p1", "p0", "p2", "p0", "p2", "p0"], [5, 10, 1, 20, 2, 60]
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.table({"problem_id": ids, "n_tokens": pa.array(tokens, pa.int64()), "valid": [True] * 6}), path)
    frame = pd.DataFrame({"problem_id": ids, "n_tokens": tokens})
    expected = (30 + 5 + 1.5) / 3
    read = TraceTokens.read(path)
    assert read.problem_ids == ids and read.n_tokens.tolist() == tokens
    assert read.problem_means().tolist() == [30.0, 5.0, 1.5]
    assert tokens_per_trace([read]) == expected
    # as pandas defined it: every table's per-problem means pooled, then their mean
    pooled = pd.concat([frame.groupby("problem_id")["n_tokens"].mean()] * 2).mean()
    assert tokens_per_trace([read, TraceTokens(ids, np.array(tokens, dtype=np.float64))]) == pooled
