"""Parquet files written atomically, with our metadata in the schema. Apart from fileio because pandas and
pyarrow take seconds to import, and most stages need neither."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tracevote.core.fileio import atomic_path


def write_parquet(target: str | Path, frames: Iterable[pd.DataFrame], metadata: dict[str, str]) -> int:
    """Stream data frames into one Parquet file (a row group each); returns the row count.

    `metadata` lands in the file's schema metadata, e.g. {"simulated": "true"}.
    """
    rows = 0
    with atomic_path(target) as tmp:
        writer: pq.ParquetWriter | None = None
        try:
            for frame in frames:
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if writer is None:
                    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **_encode(metadata)})
                    writer = pq.ParquetWriter(tmp, schema, compression="zstd")
                writer.write_table(table.cast(writer.schema))
                rows += len(frame)
        finally:
            if writer is not None:
                writer.close()
    return rows


def read_parquet_metadata(path: str | Path) -> dict[str, str]:
    raw = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in raw.items() if not k.startswith(b"pandas")}


def _encode(metadata: dict[str, str]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in metadata.items()}
