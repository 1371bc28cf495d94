"""The stop table split into problems: from Arrow record batches (as the stage reads it) exactly as from a frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tracevote.core.errors import DataError
from tracevote.deepconf.stop_table import StopTable


def _stops(order: str) -> pd.DataFrame:
    """Three problems' rows, grouped as the score stage writes them or interleaved; one row without an id."""
    ids = ["a"] * 4 + ["b"] * 3 + ["c"] * 5 + [None]
    frame = pd.DataFrame({"problem_id": ids, "sample_id": np.arange(13) % 3, "spent": np.arange(13) + 1,
                          "value": np.linspace(9.0, 1.0, 13)})
    return frame if order == "grouped" else frame.sample(frac=1, random_state=0).reset_index(drop=True)


def _as_lists(table: StopTable) -> dict[str, list[list]]:
    return {name: [rows.sample.tolist(), rows.spent.tolist(), rows.value.tolist()]
            for name, rows in sorted(table.by_problem.items())}


@pytest.mark.parametrize("order", ["grouped", "interleaved"])
@pytest.mark.parametrize("chunk", [2, 5, 100])  # batches that split problems, and one batch for all
@pytest.mark.parametrize("dictionary", [True, False])  # ids as the stage reads them, or plain strings
def test_batches_give_the_rows_a_frame_gives(order: str, chunk: int, dictionary: bool) -> None:
    frame = _stops(order)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if dictionary:
        table = table.set_column(0, "problem_id", table.column("problem_id").dictionary_encode())
    from_batches = StopTable.of_batches(table.to_batches(max_chunksize=chunk))
    assert _as_lists(from_batches) == _as_lists(StopTable.of_frame(frame))
    assert sorted(from_batches.by_problem) == ["a", "b", "c"]  # the row without an id is left out
    assert len(from_batches.rows_of("d").sample) == 0


def test_batches_missing_a_column_or_value_are_refused() -> None:
    table = pa.Table.from_pandas(_stops("grouped").iloc[:12], preserve_index=False)
    with pytest.raises(DataError, match="stop table: missing column"):
        StopTable.of_batches(table.drop_columns(["spent"]).to_batches())
    spent = pa.array([None, *range(2, 13)], type=pa.int64())
    with pytest.raises(DataError, match="stop table: column spent has 1 missing value"):
        StopTable.of_batches(table.set_column(2, "spent", spent).to_batches())
