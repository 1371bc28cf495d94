"""CSV that a spreadsheet opens as data: every CSV the project writes goes through here.

A text cell starting with =, +, -, @, a tab or a carriage return is run as a formula when Excel, LibreOffice or
Google Sheets opens the file (an id `=HYPERLINK(...)` in a third party's predictions file, copied into
`grade --per-item FILE.csv`). OWASP's CSV injection rule: such a cell is written behind a leading quote,
'=HYPERLINK(...), which each of them shows as text. Numbers stay numbers: a cell that reads as a plain number
(-1, -0.25, +3e2) is one to a spreadsheet too, never a formula. A text cell that already starts with a quote gets
a second one, so `read_cell` gives back exactly what was written. JSON outputs keep the text as it is.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the callers that write a frame have pandas loaded; the others need not load it
    import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """`value` as a spreadsheet should see it: a formula-like text behind a leading quote, anything else as it is.

    >>> [safe_cell(v) for v in ("=1+2", "@SUM(A1)", "-2+3", "-1", "-0.500000", "'quoted", "x-1", -1.5, None)]
    ["'=1+2", "'@SUM(A1)", "'-2+3", '-1', '-0.500000', "''quoted", 'x-1', -1.5, None]
    """
    if not isinstance(value, str):
        return value
    if value.startswith(QUOTE) or (value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value)):
        return QUOTE + value
    return value


def read_cell(text: str) -> str:
    """A cell as it was before `safe_cell`: "'=1+2" -> "=1+2", "''quoted" -> "'quoted", "-1" -> "-1"."""
    return text.removeprefix(QUOTE)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A header and rows as CSV ("\n" line ends, quoting where a cell needs it), every cell through `safe_cell`;
    None is an empty cell, a float is written as Python prints it (format it first for fewer digits)."""
    out = io.StringIO()
    # subtle: the csv module quotes a cell holding a character of its line end, so "\r\n" is what makes it quote a
    # lone "\r" (a "\n" line end would leave one bare, and every reader would break the row there); each row's
    # own "\r\n" is then cut to "\n", the line end of every other file here
    writer = csv.writer(out, lineterminator="\r\n")
    lines = []
    for row in (header, *rows):
        writer.writerow([safe_cell(cell) for cell in row])
        lines.append(out.getvalue().removesuffix("\r\n"))
        out.seek(0)
        out.truncate()
    return "".join(line + "\n" for line in lines)


def frame_csv(frame: pd.DataFrame, float_format: str) -> str:
    """A frame as `columns_csv` writes columns, without its index (pandas' to_csv with `float_format`)."""
    return columns_csv(frame_columns(frame), float_format)


def frame_columns(frame: pd.DataFrame) -> dict[str, list[Any]]:
    """A frame's columns as plain lists, a missing value (None, NaN, NA) as None."""
    missing = frame.isna()
    return {column: [None if gone else value for value, gone in zip(frame[column].astype(object), missing[column],
                                                                      strict=True)]
            for column in frame.columns}


def columns_csv(columns: Mapping[str, Sequence[Any]], float_format: str) -> str:
    """Columns of equal length as `csv_text` writes rows: None (or NaN) as an empty cell, every float by
    `float_format` ("%.6f", as pandas' to_csv writes it).
    {"k": [1, None], "acc": [0.5, 0.25]} with "%.2f" -> "k,acc\n1,0.50\n,0.25\n"."""
    rows = ([None if value is None or (isinstance(value, float) and math.isnan(value))
             else float_format % value if isinstance(value, float) else value for value in row]
            for row in zip(*columns.values(), strict=True))
    return csv_text(list(columns), rows)
