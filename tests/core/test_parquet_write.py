"""write_tables streams Arrow tables into one Parquet file under the first table's schema: a table already of that
schema is written as it is (no cast, so pyarrow.compute is never loaded for it), one of other types is cast to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import hang_guard_s
from tracevote.core.parquet import read_parquet_metadata, write_tables

SCHEMA = pa.schema([("problem_id", pa.large_string()), ("value", pa.float64())])

# Writes two tables of SCHEMA in a fresh interpreter, then says whether pyarrow.compute was loaded.
WRITE_AND_LIST = """
import json, sys
import numpy as np
import pyarrow as pa
from tracevote.core.parquet import numbers, strings, write_tables
schema = pa.schema([("problem_id", pa.large_string()), ("value", pa.float64())])
def table(ids, values):  # as the score stage builds its tables, from buffers (pa.array loads pyarrow.compute)
    return pa.Table.from_arrays([strings(ids), numbers(np.array(values))], schema=schema)
tables = [table(["a", "b"], [0.5, 1.5]), table(["c"], [2.5])]
rows = write_tables(sys.argv[1], tables, {"simulated": "true"})
print(json.dumps({"rows": rows, "compute": "pyarrow.compute" in sys.modules}))
"""


def test_tables_of_the_files_schema_are_written_without_loading_pyarrow_compute(tmp_path: Path) -> None:
    target = tmp_path / "scores.parquet"
    completed = subprocess.run([sys.executable, "-c", WRITE_AND_LIST, str(target)], capture_output=True, text=True,
                               check=True, timeout=hang_guard_s())
    assert json.loads(completed.stdout) == {"rows": 3, "compute": False}
    read = pq.read_table(target)
    assert read.column("problem_id").to_pylist() == ["a", "b", "c"]
    assert read.column("value").to_pylist() == [0.5, 1.5, 2.5]
    assert read_parquet_metadata(target)["simulated"] == "true"


def test_a_table_of_other_types_is_cast_to_the_first_tables_schema(tmp_path: Path) -> None:
    target = tmp_path / "scores.parquet"
    narrower = pa.table({"problem_id": pa.array(["c"], pa.string()), "value": pa.array([2.5], pa.float32())})
    rows = write_tables(target, [pa.table({"problem_id": ["a"], "value": [0.5]}, schema=SCHEMA), narrower], {})
    assert rows == 2
    read = pq.read_table(target)
    assert read.schema.field("problem_id").type == pa.large_string() and read.schema.field("value").type == pa.float64()
    assert read.column("value").to_pylist() == [0.5, 2.5]
