"""Clearing DVC's stage locks left by killed runs.

A kill -9 of `dvc repro` leaves `.dvc/tmp/rwlock` naming the dead process. Recent DVC drops entries
whose PID is gone, but once the PID is reused (containers recycle small PIDs quickly) DVC sees a live
process and refuses to run until the file is edited by hand. An entry is stale when its process is
gone or is no longer a DVC process; entries of live DVC processes are never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tracevote.core.errors import DataError
from tracevote.core.fileio import atomic_path


@dataclass(frozen=True)
class StaleEntry:
    mode: str  # "read" or "write"
    path: str
    pid: int
    cmd: str


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def holds_dvc_lock(pid: int) -> bool:
    """True while `pid` is a live process running DVC (judged by its command line where /proc has it)."""
    if pid <= 0 or not process_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc: trust that a live PID is still the one that took the lock
    if not cmdline:
        return True  # a process in the middle of exec, or a zombie: cannot tell, so keep the lock
    return any(Path(arg.decode(errors="replace")).name in ("dvc", "dvc.exe") for arg in cmdline.split(b"\0"))


def clear_stale_locks(rwlock: Path) -> list[StaleEntry]:
    """Drop the entries of dead processes from a DVC rwlock file; return what was dropped."""
    if not rwlock.is_file():
        return []
    try:
        lock = orjson.loads(rwlock.read_bytes() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{rwlock}: not valid JSON ({exc}); delete it if no dvc command is running") from exc
    stale: list[StaleEntry] = []
    writes = {path: info for path, info in lock.get("write", {}).items() if _keep(info, "write", path, stale)}
    reads = {}
    for path, infos in lock.get("read", {}).items():
        alive = [info for info in infos if _keep(info, "read", path, stale)]
        if alive:
            reads[path] = alive
    if stale:
        with atomic_path(rwlock) as tmp:
            tmp.write_bytes(orjson.dumps({"write": writes, "read": reads}))
    return stale


def _keep(info: dict[str, Any], mode: str, path: str, stale: list[StaleEntry]) -> bool:
    pid = int(info.get("pid", 0))
    if holds_dvc_lock(pid):
        return True
    stale.append(StaleEntry(mode, path, pid, str(info.get("cmd", ""))))
    return False
