"""Arrow columns as numpy without pandas: pyarrow's own `to_numpy` (and `pq.read_table`, `take`) import pandas,
~0.4 CPU s of a ~0.9 s `view` on a small project, which the pipeline tests run in every full `dvc repro`.

A primitive column's values are read from its data buffer (a view, no copy); a column with nulls is read through
Python lists, as `to_numpy` would give them (NaN for a float's nulls).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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
