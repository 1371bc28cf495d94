"""The score stage's stop table (STOP_COLUMNS: a row per record low of a trace) split into problems, and each
problem's rows checked and aligned with its samples as StopProfiles, for online replay.

At paper scale the table holds ~24 M rows. Read with pyarrow a row group at a time (`StopTable.of_batches`), each
problem's rows stay views of the batch they were decoded into: no column is copied (a pandas frame, or a table
whose chunks split a problem, copies all of them: ~1 s there).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracevote.core.arrow_numpy import array_numpy
from tracevote.core.errors import DataError
from tracevote.deepconf.confidence import StopProfiles
from tracevote.deepconf.score import STOP_COLUMNS

if TYPE_CHECKING:  # pandas only where a caller hands a frame: the explorer reads the table without it
    import pandas as pd


@dataclass(frozen=True, eq=False)
class StopRows:
    """Some rows of the stop table, as columns."""

    sample: np.ndarray  # int64
    spent: np.ndarray  # int64
    value: np.ndarray  # float64

    @staticmethod
    def of_frame(frame: pd.DataFrame) -> StopRows:
        """The sample_id, spent and value columns of a stop-table frame."""
        return StopRows(sample=frame["sample_id"].to_numpy(dtype=np.int64),
                        spent=frame["spent"].to_numpy(dtype=np.int64), value=frame["value"].to_numpy(dtype=np.float64))

    def take(self, rows: np.ndarray | slice) -> StopRows:
        return StopRows(sample=self.sample[rows], spent=self.spent[rows], value=self.value[rows])

    @staticmethod
    def concatenate(parts: list[StopRows]) -> StopRows:
        if len(parts) == 1:
            return parts[0]
        return StopRows(sample=np.concatenate([p.sample for p in parts]),
                        spent=np.concatenate([p.spent for p in parts]), value=np.concatenate([p.value for p in parts]))


NO_ROWS = StopRows(sample=np.zeros(0, dtype=np.int64), spent=np.zeros(0, dtype=np.int64), value=np.zeros(0))


@dataclass(frozen=True, eq=False)
class StopTable:
    """The stop table's rows by problem id, in table order; rows without an id are left out."""

    by_problem: dict[str, StopRows]

    def rows_of(self, problem_id: str) -> StopRows:
        return self.by_problem.get(problem_id, NO_ROWS)

    @staticmethod
    def of_frame(stops: pd.DataFrame) -> StopTable:
        check_stop_columns(list(map(str, stops.columns)))
        rows = StopRows.of_frame(stops)
        return StopTable({name: rows.take(where) for name, where in rows_by_problem(stops["problem_id"]).items()})

    @staticmethod
    def read(path: str | Path) -> StopTable:
        """The score stage's stop table file, a row group at a time: the stage writes a problem per row group, so each
        problem's rows stay views of the batch they were decoded into."""
        file = pq.ParquetFile(path, read_dictionary=["problem_id"], memory_map=True)
        check_stop_columns(file.schema_arrow.names)  # also when it has no rows
        return StopTable.of_batches(batch for group in range(file.num_row_groups)
                                    for batch in file.read_row_group(group).to_batches())

    @staticmethod
    def of_batches(batches: Iterable[pa.RecordBatch]) -> StopTable:
        """The rows of Arrow record batches (e.g. one per row group of the Parquet file, as the score stage writes a
        problem's rows); a problem's rows are views of its batch when they lie in one."""
        parts: dict[str, list[StopRows]] = defaultdict(list)
        for batch in batches:
            check_stop_columns(batch.schema.names)
            ids = batch.column("problem_id")
            ids = ids if pa.types.is_dictionary(ids.type) else ids.dictionary_encode()
            rows = StopRows(sample=_numbers(batch, "sample_id", np.int64), spent=_numbers(batch, "spent", np.int64),
                            value=_numbers(batch, "value", np.float64))
            names = [str(name) for name in ids.dictionary.to_pylist()]
            for code, where in rows_by_code(_codes_of(ids)).items():
                parts[names[code]].append(rows.take(where))
        return StopTable({name: StopRows.concatenate(pieces) for name, pieces in parts.items()})


def _numbers(batch: pa.RecordBatch, column: str, dtype: type) -> np.ndarray:
    """A column as numpy (a view when its type is `dtype`); DataError when it has a missing value."""
    values = batch.column(column)
    if values.null_count:
        raise DataError(f"stop table: column {column} has {values.null_count} missing value(s)")
    return array_numpy(values, dtype)


def _codes_of(ids: pa.DictionaryArray) -> np.ndarray:
    """The dictionary's codes as int64, -1 for a missing id."""
    if not ids.null_count:
        return array_numpy(ids.indices, np.int64)
    return np.asarray([-1 if code is None else code for code in ids.indices.to_pylist()], dtype=np.int64)


def rows_by_code(codes: np.ndarray) -> dict[int, np.ndarray | slice]:
    """{code: its rows, in order}; slices when each code's rows are contiguous (as the score stage writes them).
    [0, 0, 1] -> {0: slice(0, 2), 1: slice(2, 3)}. Rows of code -1 (no id) are left out."""
    if len(codes) == 0:
        return {}
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    if len(np.unique(codes[starts])) == len(starts) and codes.min(initial=0) >= 0:
        ends = [*starts[1:].tolist(), len(codes)]
        return {int(codes[a]): slice(int(a), b) for a, b in zip(starts.tolist(), ends, strict=True)}
    order = np.argsort(codes, kind="stable")
    present = np.unique(codes[codes >= 0])
    bounds = np.searchsorted(codes[order], np.concatenate((present, [present[-1] + 1 if len(present) else 0])))
    return {int(code): order[bounds[i]:bounds[i + 1]] for i, code in enumerate(present.tolist())}


def rows_by_problem(problem_ids: pd.Series) -> dict[str, np.ndarray | slice]:
    """{problem id: its rows, in table order}: ["a", "a", "b"] -> {"a": slice(0, 2), "b": slice(2, 3)}."""
    codes, names = _codes(problem_ids)
    return {names[code]: where for code, where in rows_by_code(codes).items()}


def _codes(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes of `values` (-1 for a missing value) and the values they stand for."""
    import pandas as pd

    if isinstance(values.dtype, pd.CategoricalDtype):  # ids read as a dictionary: the codes are there
        return values.cat.codes.to_numpy(dtype=np.int64), [str(name) for name in values.cat.categories]
    codes, names = pd.factorize(values)
    return codes.astype(np.int64, copy=False), [str(name) for name in names]


def problem_stops(stops: pd.DataFrame, problem_id: str, sample_ids: np.ndarray,
                  n_tokens: np.ndarray) -> StopProfiles:
    """One problem's rows of the stop table as StopProfiles aligned with `sample_ids` (ascending).

    `stops` holds only this problem's rows; see `stop_profiles`.
    """
    return stop_profiles(StopRows.of_frame(stops), problem_id, sample_ids, n_tokens)


def stop_profiles(rows: StopRows, problem_id: str, sample_ids: np.ndarray, n_tokens: np.ndarray) -> StopProfiles:
    """One problem's stop rows as StopProfiles aligned with `sample_ids` (ascending).

    A record must name a sample of the problem, fall within its tokens, and the records of a sample
    must fall in value as they advance.
    """
    where = f"stop table, problem {problem_id}"
    sample, spent, value = rows.sample, rows.spent, rows.value
    position = _positions(sample_ids, sample)
    unknown = (position < 0) | (position >= len(sample_ids))
    unknown[~unknown] = sample_ids[position[~unknown]] != sample[~unknown]
    if unknown.any():
        raise DataError(f"{where}: sample_id {sample[unknown][0]} is not in the score table")
    if not _in_order(position, spent):  # the score stage writes them in order: no sort needed
        order = np.lexsort((spent, position))
        position, spent, value = position[order], spent[order], value[order]
    beyond = (spent < 1) | (spent > n_tokens[position])
    if beyond.any():
        i = int(np.argmax(beyond))
        raise DataError(f"{where}, sample_id {sample_ids[position[i]]}: a stop after {spent[i]} tokens, "
                        f"but the sample has {n_tokens[position[i]]}")
    same = position[1:] == position[:-1]
    rising = same & ((value[1:] >= value[:-1]) | (spent[1:] == spent[:-1]))
    if rising.any():
        i = int(np.argmax(rising))
        raise DataError(f"{where}, sample_id {sample_ids[position[i]]}: record lows must fall as tokens "
                        f"advance (value {value[i]} at {spent[i]} tokens, then {value[i + 1]} at {spent[i + 1]})")
    counts = np.bincount(position, minlength=len(sample_ids))
    return StopProfiles(offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64), spent=spent, value=value)


def _positions(sample_ids: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Where each of `sample` would sit in `sample_ids` (ascending, distinct): the ids themselves when they are
    0..n-1, as the score stage numbers samples (no search through millions of rows)."""
    if len(sample_ids) and sample_ids[0] == 0 and sample_ids[-1] == len(sample_ids) - 1:
        return sample
    return np.searchsorted(sample_ids, sample)


def _in_order(position: np.ndarray, spent: np.ndarray) -> bool:
    """Sorted by (position, spent), as np.lexsort((spent, position)) would leave them."""
    step = np.diff(position)
    return bool(np.all((step > 0) | ((step == 0) & (spent[1:] >= spent[:-1]))))


def check_stop_columns(columns: list[str]) -> None:
    missing = [c for c in STOP_COLUMNS if c not in columns]
    if missing:
        raise DataError(f"stop table: missing column(s) {', '.join(missing)} (has: {', '.join(columns)})")
