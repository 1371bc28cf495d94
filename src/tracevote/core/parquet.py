"""Parquet files written atomically, with our metadata in the schema. Apart from fileio because pyarrow takes a
second to import, and most stages need neither it nor pandas (which the score stage does without)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracevote.core.fileio import atomic_path

if TYPE_CHECKING:
    import pandas as pd

# pandas dtype -> the "pandas_type" pyarrow records for it
_PANDAS_TYPES = {"str": "object", "Int64": "int64", "int64": "int64", "float64": "float64", "bool": "bool"}


def write_parquet(target: str | Path, frames: Iterable[pd.DataFrame], metadata: dict[str, str]) -> int:
    """Stream data frames into one Parquet file (a row group each); returns the row count.

    `metadata` lands in the file's schema metadata, e.g. {"simulated": "true"}.
    """
    return write_tables(target, (pa.Table.from_pandas(frame, preserve_index=False) for frame in frames), metadata)


def write_tables(target: str | Path, tables: Iterable[pa.Table], metadata: dict[str, str], **options: Any) -> int:
    """Stream Arrow tables into one Parquet file (a row group each, the first one's schema); returns the row count.

    `options` go to pyarrow's ParquetWriter (encodings, say), after compression="zstd"."""
    rows = 0
    with atomic_path(target) as tmp:
        writer: pq.ParquetWriter | None = None
        try:
            for table in tables:
                if writer is None:
                    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **_encode(metadata)})
                    writer = pq.ParquetWriter(tmp, schema, **{"compression": "zstd", **options})
                if not table.schema.equals(writer.schema, check_metadata=False):
                    # a compute function: pyarrow.compute (~0.04 CPU s to load) only for a table whose types differ
                    table = table.cast(writer.schema)
                writer.write_table(table)
                rows += len(table)
        finally:
            if writer is not None:
                writer.close()
    return rows


@functools.cache
def pandas_version() -> str:
    """The installed pandas' version, without importing pandas; looked up once, when a schema first needs it
    (importlib.metadata scans every installed distribution: ~0.03 CPU s)."""
    from importlib.metadata import version

    return version("pandas")


def pandas_metadata(schema: pa.Schema, dtypes: dict[str, str]) -> dict[bytes, bytes]:
    """The "pandas" schema metadata pyarrow writes for a frame of these columns (`dtypes`: column -> pandas dtype,
    e.g. "Int64", "str"), so a table built without pandas reads back as that frame, nullable integers included."""
    columns = [{"name": field.name, "field_name": field.name, "pandas_type": _PANDAS_TYPES[dtypes[field.name]],
                "numpy_type": dtypes[field.name], "metadata": None} for field in schema]
    value = {"index_columns": [], "column_indexes": [], "columns": columns, "attributes": {},
             "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": pandas_version()}
    return {b"pandas": json.dumps(value).encode()}


# Columns built from their buffers: pa.array() imports pandas (to check whether it was handed a Series), which
# costs the score stage about a second of start-up.

def numbers(values: np.ndarray, *, missing: np.ndarray | None = None) -> pa.Array:
    """An int64 or float64 column of `values`; `missing` (bool) marks nulls."""
    values = np.ascontiguousarray(values)
    validity = None if missing is None or not missing.any() else _bits(~missing)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [validity, pa.py_buffer(values)])


def booleans(values: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, _bits(values)])


def strings(values: list[str]) -> pa.Array:
    """A large_string column of `values`."""
    encoded = [value.encode() for value in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(data) for data in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(encoded), [None, pa.py_buffer(offsets),
                                                                   pa.py_buffer(b"".join(encoded))])


def repeated(text: str, n: int) -> pa.Array:
    """`text` n times as a large_string column (a Python list of n strings would be slower)."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(data)
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def _bits(values: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(np.asarray(values, dtype=bool), bitorder="little"))


def read_parquet(path: str | Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A Parquet file's `columns` (all by default) through pyarrow alone: pq.read_table's dataset layer imports
    pandas (~0.3 CPU s of a stage's start)."""
    return pq.ParquetFile(path, memory_map=True).read(columns=None if columns is None else list(columns))


def read_parquet_metadata(path: str | Path) -> dict[str, str]:
    raw = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"pandas")}


def _encode(metadata: dict[str, str]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in metadata.items()}
