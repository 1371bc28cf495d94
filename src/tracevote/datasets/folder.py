"""Rows of a folder in the DyLAN AIME write-up's layout: one problem per JSON file, files numbered from 0.

    AIME/2024/0.json ... AIME/2024/14.json, AIME/2025/0.json, ...    (a folder of year folders)
    AIME/2024/0.json ... AIME/2024/14.json                           (one year folder)

Each file is {"problem", "solution", "answer", "year", "problem_number"}; 0.json is problem 1. A row is the
file's fields plus `id` "<year folder>-<file number>" ("2024-0") and `file` ("2024/0.json"), so a dataset
entry reads it with `id_key: id`. Files and folders starting with "." are skipped (.DS_Store). In a folder of year
folders, a year folder's name starts with a digit (2024, 2025_II); any other folder, such as the write-up's
`sample/` (its test problem), is skipped and named by folder_summary.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tracevote.core.errors import DataError
from tracevote.core.fileio import read_json_file
from tracevote.datasets.problems import id_problem

PROBLEM_FILE = re.compile(r"(0|[1-9][0-9]*)\.json")
YEAR_FOLDER = re.compile(r"[0-9]")  # .match: the name starts with a digit
FIELDS: dict[str, tuple[type, ...]] = {"problem": (str,), "solution": (str,), "answer": (str, int),
                                       "year": (str, int), "problem_number": (int,)}
Row = dict[str, Any]


def read_problem_folder(folder: Path) -> list[Row]:
    """Every problem of the folder, year folders in name order and files by number within each."""
    years, _ = year_folders(folder)
    if years == [folder]:
        return _read_year(folder, folder.parent)
    return [row for year in years for row in _read_year(year, folder)]


def year_folders(folder: Path) -> tuple[list[Path], list[Path]]:
    """(the year folders read, the other folders skipped); ([folder], []) for a folder of problem files."""
    entries = _visible(folder)
    if not any(entry.is_dir() for entry in entries):
        return [folder], []
    stray = [entry for entry in entries if not entry.is_dir()]
    if stray:
        raise DataError(f"{stray[0]}: not a year folder; a folder of year folders holds only folders")
    years = [entry for entry in entries if YEAR_FOLDER.match(entry.name)]
    skipped = [entry for entry in entries if not YEAR_FOLDER.match(entry.name)]
    if not years:
        raise DataError(f"{folder}: no year folder (a name starting with a digit, such as 2024); it holds only "
                        f"{', '.join(entry.name + '/' for entry in skipped)}")
    return years, skipped


def folder_summary(folder: Path) -> str:
    """What read_problem_folder reads and skips: "2024/ (15 files), 2025/ (15 files); skipped sample/ (...)"."""
    years, skipped = year_folders(folder)
    read = ", ".join(f"{year.name}/ ({sum(1 for e in _visible(year) if PROBLEM_FILE.fullmatch(e.name))} files)"
                     for year in years)
    if not skipped:
        return read
    return (f"{read}; skipped {', '.join(entry.name + '/' for entry in skipped)} (not a year folder: its name does "
            f"not start with a digit)")


def _read_year(year: Path, root: Path) -> list[Row]:
    reason = id_problem(year.name)
    if reason is not None:
        raise DataError(f"{year}: the year folder's name becomes part of each id, but {reason}")
    numbered = []
    for entry in _visible(year):
        match = PROBLEM_FILE.fullmatch(entry.name)
        if match is None or not entry.is_file():
            raise DataError(f"{entry}: not a problem file; a year folder holds only 0.json, 1.json, ...")
        numbered.append((int(match.group(1)), entry))
    if not numbered:
        raise DataError(f"{year}: no problem files (0.json, 1.json, ...)")
    return [_row(path, number, year.name, path.relative_to(root).as_posix()) for number, path in sorted(numbered)]


def _row(path: Path, number: int, year: str, file: str) -> Row:
    data = read_json_file(path, dict, "one JSON object (a problem)")
    for field, types in FIELDS.items():
        value = data.get(field)
        if isinstance(value, bool) or not isinstance(value, types) or value == "":
            kinds = " or ".join("text" if kind is str else "an integer" for kind in types)
            raise DataError(f"{path}: field {field!r}: expected {kinds}, got {value!r:.80}")
    if data["problem_number"] != number + 1:
        raise DataError(f"{path}: field 'problem_number': {data['problem_number']!r} must be {number + 1} "
                        f"({number}.json is problem {number + 1})")
    for field in ("id", "file"):
        if field in data:
            raise DataError(f"{path}: field {field!r}: not allowed; the reader sets it from the folder and file")
    return {**data, "id": f"{year}-{number}", "file": file}


def _visible(folder: Path) -> list[Path]:
    return sorted(entry for entry in folder.iterdir() if not entry.name.startswith("."))
