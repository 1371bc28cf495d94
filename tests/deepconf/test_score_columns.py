"""The score table read through pyarrow alone (the aggregate stage) gives what the same file read through pandas gives:
the same problems, validity counts and aggregate, nulls included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pyarrow.parquet as pq

from tests.conftest import REPO_ROOT
from tests.deepconf.test_evaluate import NAN, table
from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.deepconf.evaluate import aggregate, split_problems
from tracevote.deepconf.sample_stats import validity_counts
from tracevote.deepconf.score_columns import ScoreColumns
from tracevote.store.records import NO_ANSWER

REAL_SCORES = REPO_ROOT / "tests" / "fixtures" / "real_scores" / "tinymath.parquet"
# problem ids that sort differently as text and by their number, an invalid sample (no answer), a NaN measure, and
# a compared signal's columns
ROWS = [("p10", 1, 0.5), ("p10", 2, 0.9), ("p10", None, 0.1), ("p9", 3, NAN), ("p9", 3, 0.2), ("p9", 4, 0.7),
        ("p2", 1, 0.3), ("p2", None, 0.8), ("p2", 1, 0.4)]


def with_nulls(path: Path) -> Path:
    """ROWS in reverse sample order, with `chosen_<measure>` columns, written by pandas as a Parquet file."""
    frame = table(ROWS, gold={"p10": 2, "p9": 3, "p2": 1}).iloc[::-1]
    for i, measure in enumerate(MEASURES):
        frame[f"chosen_{measure}"] = np.linspace(0, 1, len(frame))[::1 if i % 2 else -1]
    frame.to_parquet(path, index=False)
    return path


def both_ways(path: Path) -> tuple[object, pd.DataFrame]:
    return pq.ParquetFile(path).read(), pd.read_parquet(path)


def result_bytes(scores: object, config: EvalConfig) -> bytes:
    return orjson.dumps(aggregate(scores, config).to_json(), option=orjson.OPT_SERIALIZE_NUMPY)  # type: ignore[arg-type]


def test_the_real_score_table_aggregates_the_same_through_pyarrow_as_through_pandas() -> None:
    arrow, frame = both_ways(REAL_SCORES)
    config = EvalConfig(k=(1, 8, 64), repeat=4, seed=3, etas=(0.1, 0.9), bootstrap=100)
    assert result_bytes(arrow, config) == result_bytes(frame, config)


def test_nulls_and_compared_signals_read_the_same_through_pyarrow_as_through_pandas(tmp_path: Path) -> None:
    arrow, frame = both_ways(with_nulls(tmp_path / "scores.parquet"))
    assert arrow.column("answer").null_count == 2
    config = EvalConfig(k=(1, 3), repeat=5, seed=0, etas=(0.5,), bootstrap=100)
    assert result_bytes(arrow, config) == result_bytes(frame, config)
    assert validity_counts(arrow) == validity_counts(frame)
    problems = split_problems(arrow)
    assert [p.problem_id for p in problems] == ["p10", "p2", "p9"]  # ordered as text
    assert problems[0].codes.tolist() == [0, 1, NO_ANSWER] and problems[0].sample_ids.tolist() == [0, 1, 2]
    assert np.isnan(problems[2].confidence[:, 0]).all()


def test_a_column_with_nulls_reads_as_pandas_would_read_it(tmp_path: Path) -> None:
    columns = ScoreColumns.of(pq.ParquetFile(with_nulls(tmp_path / "scores.parquet")).read())
    answers = pd.read_parquet(tmp_path / "scores.parquet")["answer"]
    assert columns.missing("answer").tolist() == answers.isna().tolist()
    assert columns.filled_ints("answer", NO_ANSWER).tolist() == answers.fillna(NO_ANSWER).tolist()
    assert np.isnan(columns.floats("avg")).sum() == 1
    sources = pd.read_parquet(tmp_path / "scores.parquet")["answer_source"]
    assert columns.texts("answer_source").tolist() == sources.tolist()
    text_nulls = ScoreColumns.of(pd.DataFrame({"finish_reason": ["stop", None]}))
    assert text_nulls.texts("finish_reason").tolist() == np.asarray(pd.Series(["stop", None]), dtype=str).tolist()
