"""Whether a ledger folder is laid out as a ledger: the one check every paid stage makes when it opens a ledger, before
its first request, and `ledger verify` reports in full (so verify refuses what the stages refuse).

    <root>/<meta>          a regular file (ledger.json, pool.json, live.json)
    <root>/<items>         a regular file (items.json, problems.json)
    <root>/<logs>/         a folder, not a link to elsewhere (and so each folder of files the ledger keeps: a
                           pool's confidence blocks)
    <root>/<logs>/*.tvf    each a regular file resolving inside that folder (a block: *.tvc)

A directory where one of these files belongs (left by hand, or by a tool that mirrored the tree) would otherwise be
met only when the stage stores its first reply, after paying for it; a folder linked elsewhere would be read, and
written, outside the project.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tracevote.core.errors import DataError
from tracevote.core.names import check_inside

LOG_SUFFIX = ".tvf"  # a ledger log's (store.ledger's)
LOG_MOVED = " (the stage then requests that item's calls again)"


def layout_problems(root: Path, *, meta: str, items: str, folders: Sequence[tuple[str, str]]) -> list[str]:
    """One line for each part of the ledger at `root` that is not where, or not what, it should be; [] when sound
    (or when `root` does not exist yet: opening creates it). `folders`: (folder, suffix of its files), the logs'
    first ("calls", ".tvf")."""
    problems = [problem for name in (meta, items)
                if (problem := non_file_problem(root / name, f"the ledger's {name}", then="")) is not None]
    for name, suffix in folders:
        problems += _folder_problems(root / name, suffix)
    return problems


def _folder_problems(folder: Path, suffix: str) -> list[str]:
    """The folder's own problem (a file, or a link to elsewhere), else one for each of its files ending in `suffix`
    that is not a regular file inside it."""
    problem = _folder_problem(folder)
    if problem is not None:
        return [problem]
    if not folder.is_dir():
        return []
    with os.scandir(folder) as entries:  # each entry's kind comes with the listing: no stat for a plain file
        odd = sorted(Path(entry.path) for entry in entries if entry.name.endswith(suffix)
                     and (entry.is_symlink() or not entry.is_file(follow_symlinks=False)))
    return [problem for path in odd if (problem := _file_problem(folder, path)) is not None]


def non_file_problem(path: Path, what: str = "a ledger log", *, then: str = LOG_MOVED) -> str | None:
    """The line for something other than a file sitting where `what` belongs (`then`: what moving it away does,
    said of a log only); None when `path` is a file or absent."""
    if not path.exists() or path.is_file():
        return None
    found = "a directory" if path.is_dir() else "not a regular file"
    return f"{path}: {found} where {what} belongs; move it out of the way{then} or restore it with `dvc checkout`"


def _file_problem(folder: Path, path: Path) -> str | None:
    outside = _outside(folder, path)
    if outside is not None:
        return outside
    if path.name.endswith(LOG_SUFFIX):
        return non_file_problem(path)
    return non_file_problem(path, "a ledger file", then=" (it is written again from its log)")


def _folder_problem(folder: Path) -> str | None:
    if not folder.exists() and not folder.is_symlink():
        return None
    outside = _outside(folder, folder)  # the folder itself no link, as Ledger.log_path checks each log
    if outside is not None:
        return outside
    if not folder.is_dir():
        return (f"{folder}: a file where the ledger's folder {folder.name}/ belongs; move it out of the way or restore "
                f"the ledger with `dvc checkout`")
    return None


def _outside(folder: Path, path: Path) -> str | None:
    """The line when `path` (or a link at it) resolves outside `folder`, as every reader and writer refuses it."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        check_inside(folder, path)
    except DataError as exc:
        return str(exc)
    return None
