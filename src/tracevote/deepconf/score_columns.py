"""The score table's columns as numpy arrays, for aggregation: one reader whether the table comes from pyarrow (the
aggregate stage, which so never imports pandas: ~0.4 of its ~0.65 CPU s) or is a pandas frame (tests, the planner,
live results), which is first turned into an Arrow table.

Nulls read as pandas reads them from the file: NaN in a float column, "nan" in a text column; a nullable integer
column (the answer) gives its values and a mask of the missing ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

import numpy as np
import pyarrow as pa

from tracevote.core.arrow_numpy import array_numpy

if TYPE_CHECKING:
    import pandas as pd

# A score table as callers hold it: read by pyarrow alone, or a pandas frame
ScoreTable = Union[pa.Table, "pd.DataFrame", "ScoreColumns"]


@dataclass(frozen=True, eq=False)
class ScoreColumns:
    """A score table's columns, each turned into numpy once, when first asked for."""

    table: pa.Table
    _arrays: dict[tuple[str, str], np.ndarray] = field(default_factory=dict, repr=False)

    @staticmethod
    def of(scores: ScoreTable) -> ScoreColumns:
        """The columns of an Arrow table or a pandas frame (its index dropped)."""
        if isinstance(scores, ScoreColumns):
            return scores
        if isinstance(scores, pa.Table):
            return ScoreColumns(scores)
        return ScoreColumns(pa.Table.from_pandas(scores, preserve_index=False))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.table.column_names)

    def __len__(self) -> int:
        return self.table.num_rows

    def floats(self, name: str) -> np.ndarray:
        """float64, NaN where null."""
        return self._cached(name, "float", lambda column: array_numpy(column, np.float64))

    def ints(self, name: str) -> np.ndarray:
        return self._cached(name, "int", lambda column: array_numpy(column, np.int64))

    def bools(self, name: str) -> np.ndarray:
        return self._cached(name, "bool", lambda column: array_numpy(column, bool))

    def texts(self, name: str) -> np.ndarray:
        """A numpy str array; a null reads "nan", as numpy spells the missing value of pandas' text columns (the score
        stage writes none)."""
        return self._cached(name, "text", lambda column: np.asarray(["nan" if value is None else value
                                                                     for value in column.to_pylist()], dtype=str))

    def ids(self, name: str) -> np.ndarray:
        """The values as numpy infers them from Python's (str for text ids, int64 for integer ids)."""
        return self._cached(name, "id", lambda column: np.asarray(column.to_pylist()))

    def missing(self, name: str) -> np.ndarray:
        """bool: where the column is null (NaN in a frame's float column counts: pyarrow reads it as null)."""
        return self._cached(name, "missing", lambda column: np.asarray([value is None for value in column.to_pylist()],
                                                                      dtype=bool))

    def filled_ints(self, name: str, fill: int) -> np.ndarray:
        """int64 with `fill` where null: a nullable integer column such as the answer."""
        def read(column: pa.ChunkedArray) -> np.ndarray:
            if column.null_count == 0:
                return array_numpy(column, np.int64)
            return np.asarray([fill if value is None else value for value in column.to_pylist()], dtype=np.int64)
        return self._cached(name, f"filled{fill}", read)

    def _cached(self, name: str, kind: str, read: Callable[[pa.ChunkedArray], np.ndarray]) -> np.ndarray:
        key = (name, kind)
        if key not in self._arrays:
            self._arrays[key] = read(self.table.column(name))
        return self._arrays[key]
