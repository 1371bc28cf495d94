"""Append-only frame logs: the on-disk unit of the ledger (trace pools and every other paid call).

A frame is `magic | length (u32) | crc32 (u32) | key field (u32) | body`, little endian, keyed one of two ways:

    TVF1  the key is an integer (a trace's sample id) in the key field; the body is the payload
    TVK1  the key is text (a call key such as "r1/agent2"); the key field is its UTF-8 length, and
          the body is the key's bytes, then the payload; the crc covers both

A kill -9 can only tear the last frame: readers stop before a torn tail, and the next writer cuts it away.
Anything else that fails a check (a flipped byte, a zeroed block) is damage: a bad frame with an intact frame
after it. Every reader and writer refuses a damaged log with DamagedLogError naming the file, the byte and
`python -m tracevote ledger repair`, which keeps every intact frame (tracevote.store.verify). Writing a log
(its one writer, its lock, when frames reach the disk) is tracevote.store.frame_writer.
The key sits outside the payload so that listing what is stored never decompresses anything.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tracevote.core.errors import DamagedLogError, DataError
from tracevote.store.layout import non_file_problem

MAGIC = b"TVF1"
KEYED_MAGIC = b"TVK1"
MAGICS = (MAGIC, KEYED_MAGIC)
HEADER = struct.Struct("<4sIII")
MAX_PAYLOAD = 1 << 31
MAX_KEY_BYTES = 1024

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
