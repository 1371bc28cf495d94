"""Append-only frame logs: the on-disk unit of the ledger (trace pools and every other paid call).

A frame is `magic | length (u32) | crc32 (u32) | key field (u32) | body`, little endian, keyed one of two ways:

    TVF1  the key is an integer (a trace's sample id) in the key field; the body is the payload
    TVK1  the key is text (a call key such as "r1/agent2"); the key field is its UTF-8 length, and
          the body is the key's bytes, then the payload; the crc covers both

A kill -9 can only tear the last frame: readers stop before a torn tail, and the next writer cuts it away.
Anything else that fails a check (a flipped byte, a zeroed block) is damage: a bad frame with an intact frame
after it. Every reader and writer refuses a damaged log with DamagedLogError naming the file, the byte and
`python -m tracevote ledger repair`, which keeps every intact frame (tracevote.store.verify). A writer
fsyncs at most FSYNC_SECONDS after a frame is appended, so a power loss costs at most that many seconds of
replies per log (a kill costs nothing the OS was handed).
The key sits outside the payload so that listing what is stored never decompresses anything.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tracevote.core.errors import DamagedLogError, DataError
from tracevote.core.fileio import make_folder
from tracevote.store.layout import non_file_problem

MAGIC = b"TVF1"
KEYED_MAGIC = b"TVK1"
MAGICS = (MAGIC, KEYED_MAGIC)
HEADER = struct.Struct("<4sIII")
MAX_PAYLOAD = 1 << 31
MAX_KEY_BYTES = 1024
FSYNC_SECONDS = 1.0  # a frame reaches the disk itself at most this long after it is appended

Key = int | str


@dataclass(frozen=True)
class Frame:
    key: Key
    offset: int
    payload: memoryview | None  # a slice of the mapped file; None when scanned without payloads


@dataclass(frozen=True)
class Damage:
    """A bad stretch of a log followed by an intact frame: not something a kill leaves."""

    offset: int  # the first byte that fails a check
    resumes_at: int  # where the next intact frame starts
    reason: str


@dataclass(frozen=True)
class LogState:
    """What a walk over one log found: its whole frames up to the first bad byte, and what follows them."""

    path: Path
    frames: list[Frame]
    good_end: int
    size: int
    damage: Damage | None  # None: the log is whole, or ends in a torn tail (size - good_end bytes)

    @property
    def torn_bytes(self) -> int:
        return 0 if self.damage else self.size - self.good_end

    def check(self) -> LogState:
        """Itself, or DamagedLogError when damaged."""
        if self.damage is not None:
            raise damaged(self.path, self.damage.offset, self.damage.reason)
        return self


def damaged(path: Path, offset: int, reason: str) -> DamagedLogError:
    """The one message for a damaged log, wherever it is met: file, byte, cause and the repair command."""
    return DamagedLogError(
        f"{path}: damaged at byte {offset:,} ({reason}); the log goes on past it, so this is not the torn "
        f"tail a kill leaves. `python -m tracevote ledger repair {path}` keeps every "
        f"intact frame and drops the damaged one, so the next run requests only the calls it held (or restore "
        f"the file from DVC's cache with `dvc checkout`)")


def survey(path: Path, *, check_every_crc: bool, keep_payloads: bool = True) -> LogState:
    """Walk a log's frames. With `check_every_crc` False only the last frame's crc is checked (the one a kill
    can tear), for listing keys or for a reader whose payloads carry their own checksums (codec format 2)."""
    data = map_log(path)
    frames, good_end = _walk(data, 0, check_every_crc=check_every_crc)
    if good_end < len(data) and frames and not check_every_crc and not _crc_ok(data, frames[-1].offset):
        good_end = frames.pop().offset  # a corrupt length made it swallow the start of the next frame
    damage = _damage_after(data, good_end)
    if not keep_payloads:
        frames = [Frame(frame.key, frame.offset, None) for frame in frames]
    return LogState(path, frames, good_end, len(data), damage)


def scan(path: Path) -> list[Frame]:
    """The whole frames of a log, without payloads and without reading them (only the last frame's crc is
    checked); DamagedLogError when a frame header is bad and intact frames follow it."""
    return survey(path, check_every_crc=False, keep_payloads=False).check().frames


def _walk(data: memoryview, offset: int, *, check_every_crc: bool) -> tuple[list[Frame], int]:
    """The frames from `offset` up to the first that fails a check, and where that one starts."""
    frames: list[Frame] = []
    size = len(data)
    while offset + HEADER.size <= size:
        frame, end = _frame_at(data, offset, check_crc=check_every_crc)
        if frame is None:
            break
        frames.append(frame)
        offset = end
    return frames, offset


def _frame_at(data: memoryview, offset: int, *, check_crc: bool) -> tuple[Frame | None, int]:
    """The frame starting at `offset` and its end, or None when its header, length or crc fails (the last
    frame's crc is always checked: it is the one a kill can tear)."""
    magic, length, crc, key_field = HEADER.unpack_from(data, offset)
    end = offset + HEADER.size + length
    if not _plausible(magic, length, key_field) or end > len(data):
        return None, offset
    body = data[offset + HEADER.size: end]
    if (check_crc or end == len(data)) and zlib.crc32(body) != crc:
        return None, offset
    if magic == MAGIC:
        return Frame(key_field, offset, body), end
    try:
        key = bytes(body[:key_field]).decode()
    except UnicodeDecodeError:
        return None, offset
    return Frame(key, offset, body[key_field:]), end


def _crc_ok(data: memoryview, offset: int) -> bool:
    return _frame_at(data, offset, check_crc=True)[0] is not None


def _damage_after(data: memoryview, good_end: int) -> Damage | None:
    """Damage when an intact frame (header, length and crc all good) starts anywhere after `good_end`; a tail
    with none is torn (a kill, or a power loss, cut the last write short)."""
    resumes_at = next_intact_frame(data, good_end + 1)
    if resumes_at is None:
        return None
    return Damage(good_end, resumes_at, _what_failed(data, good_end))


def next_intact_frame(data: memoryview, start: int) -> int | None:
    """The offset of the first intact frame at or after `start`, found by its magic and checked whole."""
    raw = data.obj if isinstance(data.obj, mmap.mmap | bytes) else bytes(data)
    position = start
    while position + HEADER.size <= len(data):
        found = [at for at in (raw.find(magic, position) for magic in MAGICS) if at >= 0]
        if not found:
            return None
        position = min(found)
        if position + HEADER.size <= len(data) and _crc_ok(data, position):
            return position
        position += 1
    return None


def _what_failed(data: memoryview, offset: int) -> str:
    if offset + HEADER.size > len(data):
        return "a frame header cut short"
    magic, length, _, key_field = HEADER.unpack_from(data, offset)
    if magic not in MAGICS:
        return f"no frame starts there (read {bytes(magic)!r})"
    if not _plausible(magic, length, key_field) or offset + HEADER.size + length > len(data):
        return f"its frame header is corrupt (length {length:,})"
    return "its frame fails its checksum"


def _map(path: Path) -> memoryview:
    """The file's bytes, mapped: only the pages a reader touches are read, each once.

    The mapping lives as long as any slice of it; writers only append, or cut a torn tail that no
    reader decodes, and repair replaces the file rather than rewriting it, so mapped bytes never change.
    """
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))


def _plausible(magic: bytes, length: int, key_field: int) -> bool:
    if magic == MAGIC:
        return length <= MAX_PAYLOAD
    return magic == KEYED_MAGIC and key_field <= min(length, MAX_KEY_BYTES) and length <= MAX_PAYLOAD


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


def frame_bytes(key: Key, payload: bytes | memoryview) -> bytes:
    """One whole frame, as a writer appends it."""
    if isinstance(key, int):
        return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload), key) + bytes(payload)
    key_bytes = key.encode()
    if not 0 < len(key_bytes) <= MAX_KEY_BYTES:
        raise ValueError(f"call key {key!r}: must be 1-{MAX_KEY_BYTES} bytes of UTF-8")
    body = key_bytes + bytes(payload)
    return HEADER.pack(KEYED_MAGIC, len(body), zlib.crc32(body), len(key_bytes)) + body


def iter_frames(path: Path, *, check_every_crc: bool = True) -> Iterator[Frame]:
    """Every whole frame, first copy of each key only; DamagedLogError when the log is damaged.

    The file is mapped once; payloads are slices of it. With `check_every_crc` False only the last
    frame's crc is checked, for a reader that checks what it decodes by the payload's own checksums
    (codec format 2; it reports a failure through `damaged`) and so need not read every byte.
    """
    yield from first_copies(survey(path, check_every_crc=check_every_crc).check().frames)


def first_copies(frames: Iterable[Frame]) -> Iterator[Frame]:
    """The frames in order, each key's first copy only (a later copy of a key is never read)."""
    seen: set[Key] = set()
    for frame in frames:
        if frame.key not in seen:
            seen.add(frame.key)
            yield frame


def iter_payloads(path: Path, *, check_every_crc: bool = True) -> Iterator[tuple[Key, memoryview]]:
    """(key, payload) of `iter_frames`."""
    for frame in iter_frames(path, check_every_crc=check_every_crc):
        yield frame.key, frame.payload  # type: ignore[misc]


@dataclass(frozen=True)
class Salvage:
    """Every intact frame of a log, found by resyncing past each bad stretch, and what was skipped."""

    frames: list[Frame]  # in file order, duplicates of a key included
    damages: list[Damage]
    torn_bytes: int  # the tail after the last intact frame


def salvage(data: memoryview) -> Salvage:
    """Walk past damage instead of stopping at it: what verify reports and repair keeps."""
    frames, offset = _walk(data, 0, check_every_crc=True)
    damages: list[Damage] = []
    while offset < len(data):
        resumes_at = next_intact_frame(data, offset + 1)
        if resumes_at is None:
            break
        damages.append(Damage(offset, resumes_at, _what_failed(data, offset)))
        more, offset = _walk(data, resumes_at, check_every_crc=True)
        frames += more
    return Salvage(frames, damages, len(data) - offset)


def map_log(path: Path) -> memoryview:
    """The log's bytes, mapped read-only (empty when it does not exist)."""
    refuse_non_file(path)
    return _map(path) if path.exists() else memoryview(b"")


def refuse_non_file(path: Path) -> None:
    """DataError when something other than a file (a directory, a socket) sits where the log `path` belongs: every
    reader, the writer, verify and repair meet it as this one line."""
    problem = non_file_problem(path)
    if problem is not None:
        raise DataError(problem)


def key_named_at(data: memoryview, offset: int) -> Key | None:
    """The key a (possibly damaged) frame header at `offset` names, when its header is readable at all."""
    if offset + HEADER.size > len(data):
        return None
    magic, _, _, key_field = HEADER.unpack_from(data, offset)
    if magic == MAGIC:
        return key_field
    start = offset + HEADER.size
    if magic != KEYED_MAGIC or key_field > MAX_KEY_BYTES or start + key_field > len(data):
        return None
    try:
        return bytes(data[start: start + key_field]).decode()
    except UnicodeDecodeError:
        return None


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
