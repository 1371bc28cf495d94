"""The one door from outside names to file names: any id becomes a safe, bounded, collision-free name.

Ids and names from input (a problem id, a prediction id, a call's item) are data. A file name is made from
one only here, and every path built from one is checked to lie inside its folder.

    "p1"                   -> "p1"                          (already plain: kept, so names stay readable)
    "AIME-2025 #3"         -> "aime-2025-3~0d59f826dbe12f14dea4"
    "../../etc/passwd"     -> "etc-passwd~3754d6cb3a38e1185e5b"  (never a separator, never "." or "..")

A kept name is lowercase ASCII letters, digits, '.', '_' and '-', starts with a letter or digit, does not end
in '.', and is at most KEPT_MAX characters. Every other id gets a readable slug and '~' and the first
DIGEST_HEX hex digits of its UTF-8 sha256. '~' never appears in a kept name, so the two forms cannot meet;
digests are lowercase, so two names that differ only in case (which a case-insensitive file system, or a
clone on one, would merge) are always distinct ids mapped to distinct lowercase names.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from tracevote.core.errors import DataError

KEPT_MAX = 80
SLUG_MAX = 40
DIGEST_HEX = 20  # 80 bits: a collision among a project's ids is not a practical concern
NAME_MAX = max(KEPT_MAX, SLUG_MAX + 1 + DIGEST_HEX)  # bytes: far below the 255 of common file systems
_KEPT = re.compile(rf"[a-z0-9](?:[a-z0-9._-]{{0,{KEPT_MAX - 2}}}[a-z0-9_-])?")
# Names Windows reserves whatever the extension: a clone there could not hold such a file.
_RESERVED = re.compile(r"(con|prn|aux|nul|com\d|lpt\d)(\..*)?")


def safe_name(name: str) -> str:
    """`name` as a file name (see the module docstring); the same name always maps to the same result."""
    if not isinstance(name, str):
        raise TypeError(f"safe_name takes text, not {type(name).__name__}")
    if _KEPT.fullmatch(name) and not _RESERVED.fullmatch(name):
        return name
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:SLUG_MAX].strip("-") or "id"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_HEX]
    return f"{slug}~{digest}"


def inside(folder: Path, name: str, suffix: str = "") -> Path:
    """`folder / (safe_name(name) + suffix)`, checked to lie inside `folder` (DataError if not, e.g. through
    a symlinked folder); `suffix` is ours (".tvf"), never input."""
    path = folder / f"{safe_name(name)}{suffix}"
    check_inside(folder, path)
    return path


def check_inside(folder: Path, path: Path) -> None:
    """DataError unless `path`, resolved, lies inside `folder`. The folder's parents may be symlinks (a project
    under a symlinked home), but not the folder itself nor anything below it: a symlinked `calls/` or log
    pointing elsewhere is refused, as is a folder that is a symlink to outside."""
    absolute = Path(os.path.abspath(folder))
    root = absolute.parent.resolve() / absolute.name
    if not path.resolve().is_relative_to(root):
        raise DataError(f"{path}: resolves outside {folder}; refusing to read or write it")


def recorded_path(folder: Path, relative: str, *, source: Path) -> Path:
    """`folder / relative` for a path `source` (a manifest) records relative to `folder`; a hand-edited one that is
    absolute or climbs out with '..' is a DataError. (Symlinks there are the user's own layout, e.g. `pools/` on
    another disk, so only the recorded text is checked.)"""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts or "\0" in relative:
        raise DataError(f"{source}: the recorded path {relative!r} is not a folder inside {folder}")
    return folder / relative
