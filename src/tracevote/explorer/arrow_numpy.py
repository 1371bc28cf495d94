"""Parquet columns as numpy without pandas: pyarrow's own `to_numpy` (and `pq.read_table`, `take`) import pandas,
~0.4 CPU s of a ~0.9 s `view` on a small project, which the pipeline tests run in every full `dvc repro`.

A primitive column's values are read from its data buffer (a view, no copy); a column with nulls is read through
Python lists, as `to_numpy` would give them (NaN for a float's nulls).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracevote.core.errors import DataError
from tracevote.deepconf.stop_table import StopRows, StopTable, check_stop_columns, rows_by_code

_DTYPES = {pa.int8(): "<i1", pa.int16(): "<i2", pa.int32(): "<i4", pa.int64(): "<i8", pa.uint8(): "<u1",
           pa.uint16(): "<u2", pa.uint32(): "<u4", pa.uint64(): "<u8", pa.float32(): "<f4", pa.float64(): "<f8"}


def array_numpy(values: pa.Array | pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A column as numpy `dtype`: array_numpy(pa.array([1, 2]), np.float64) -> array([1., 2.])."""
    if isinstance(values, pa.ChunkedArray):
        parts = [array_numpy(chunk, dtype) for chunk in values.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    kind = _DTYPES.get(values.type)
    if kind is None or values.null_count:
        return np.asarray(values.to_pylist(), dtype=dtype)
    data = np.frombuffer(values.buffers()[1], dtype=kind)[values.offset:values.offset + len(values)]
    return data.astype(dtype, copy=False)


def read_stop_table(path: Path) -> StopTable:
    """The score stage's stop table, a row group at a time, as StopTable.of_batches reads it: each problem's rows
    in order (its problem ids read as Parquet stores them, a dictionary)."""
    parts: dict[str, list[StopRows]] = defaultdict(list)
    for batch in pq.ParquetFile(path, read_dictionary=["problem_id"]).iter_batches():
        check_stop_columns(batch.schema.names)
        ids = batch.column("problem_id")
        names = [str(name) for name in ids.dictionary.to_pylist()]
        codes = array_numpy(ids.indices, np.int64) if not ids.null_count else np.asarray(
            [-1 if code is None else code for code in ids.indices.to_pylist()], dtype=np.int64)
        rows = StopRows(sample=_whole(batch, "sample_id", np.int64), spent=_whole(batch, "spent", np.int64),
                        value=_whole(batch, "value", np.float64))
        for code, where in rows_by_code(codes).items():
            parts[names[code]].append(rows.take(where))
    return StopTable({name: StopRows.concatenate(pieces) for name, pieces in parts.items()})


def _whole(batch: pa.RecordBatch, column: str, dtype: type) -> np.ndarray:
    values = batch.column(column)
    if values.null_count:
        raise DataError(f"stop table: column {column} has {values.null_count} missing value(s)")
    return array_numpy(values, dtype)
