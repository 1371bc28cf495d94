"""Writing frame logs (tracevote.store.framing has the format): the one writer a log has at a time, appending
under an exclusive lock and fsyncing on a timer, and repair's whole-log rewrite under that same lock.

A writer fsyncs at most FSYNC_SECONDS after a frame is appended, so a power loss costs at most that many seconds
of replies per log (a kill costs nothing the OS was handed).
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path

from tracevote.core.errors import DamagedLogError, DataError
from tracevote.core.fileio import make_folder
from tracevote.store.framing import Frame, Key, frame_bytes, refuse_non_file, survey

FSYNC_SECONDS = 1.0  # a frame reaches the disk itself at most this long after it is appended


class FrameWriter:
    """Appends frames to one log under an exclusive lock; cuts a torn tail when opened, refuses a damaged log.

    Each appended frame is fsynced within FSYNC_SECONDS by a timer (and at close), so a power loss costs at
    most the replies of the last FSYNC_SECONDS, while a run storing many small replies a second pays one
    fsync a second, not one per reply.
    """

    def __init__(self, path: Path) -> None:
        make_folder(path.parent)
        refuse_non_file(path)
        self.path = path
        created = not path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise DataError(f"{path}: another process is writing this log (a second run of the same stage?)") from None
        try:
            state = survey(path, check_every_crc=False, keep_payloads=False).check()
        except DamagedLogError:
            os.close(self._fd)
            raise
        self.torn_bytes = state.torn_bytes
        if self.torn_bytes:
            os.ftruncate(self._fd, state.good_end)
        self.keys: set[Key] = {frame.key for frame in state.frames}
        os.lseek(self._fd, state.good_end, os.SEEK_SET)
        if created:
            fsync_folder(path.parent)  # so the log's name survives a power loss along with its frames
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._sync_error: OSError | None = None
        self._torn_at: int | None = None  # where a refused append began, when it could not be cut back
        self.synced = threading.Event()  # set by each fsync; a test waits on it instead of on the clock

    def append(self, key: Key, payload: bytes) -> None:
        """Once this returns, a kill of this process cannot lose the frame (the OS holds the bytes). A write the
        disk refuses partway is cut back to where the frame began, so the log ends whole and the same frame can
        be appended again once there is room (a cut that fails leaves a torn tail: the writer refuses more)."""
        self._raise_sync_error()
        if self._torn_at is not None:
            raise OSError(errno.EIO, f"an earlier append to {self.path} could not be cut back")
        frame = memoryview(frame_bytes(key, payload))
        start = os.lseek(self._fd, 0, os.SEEK_CUR)
        try:
            while frame:
                frame = frame[os.write(self._fd, frame):]
        except OSError:
            self._cut_back(start)
            raise
        self.keys.add(key)
        self._schedule_sync()

    def _cut_back(self, start: int) -> None:
        try:
            os.ftruncate(self._fd, start)
            os.lseek(self._fd, start, os.SEEK_SET)
        except OSError:
            self._torn_at = start

    def _schedule_sync(self) -> None:
        with self._lock:
            if self._timer is None:
                self.synced.clear()
                self._timer = threading.Timer(FSYNC_SECONDS, self._sync_now)
                self._timer.daemon = True
                self._timer.start()

    def _sync_now(self) -> None:
        with self._lock:
            self._timer = None
            if self._fd < 0:
                return
            try:
                os.fsync(self._fd)
            except OSError as exc:  # raised to the writing thread at its next append or close
                self._sync_error = exc
            self.synced.set()

    def _raise_sync_error(self) -> None:
        if self._sync_error is not None:
            error, self._sync_error = self._sync_error, None
            raise error

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._fd < 0:
                return
            fd, self._fd = self._fd, -1
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self.synced.set()
        self._raise_sync_error()

    def __enter__(self) -> FrameWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def lock_log(path: Path, *, read_only: bool = False) -> int:
    """An fd of `path` holding its writer lock (DataError while a writer has it): repair rewrites under it.
    `read_only`: for a reader that only needs writers kept out (flock does not care how the file was opened),
    so a log DVC checked out read-only (a symlink or hardlink cache) can still be locked."""
    refuse_non_file(path)
    fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataError(f"{path}: a run is writing this log; repair it when that run has ended") from None
    return fd


def replace_log(path: Path, frames: list[Frame]) -> None:
    """Write `frames` as the whole log, atomically: a new file fsynced, renamed over the old one."""
    temporary = path.with_name(path.name + ".repairing")
    with open(temporary, "wb") as handle:
        for frame in frames:
            handle.write(frame_bytes(frame.key, frame.payload))  # type: ignore[arg-type]
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_folder(path.parent)
