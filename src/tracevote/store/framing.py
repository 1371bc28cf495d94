"""Append-only frame logs: the on-disk unit of a pool.

A frame is `magic | payload length (u32) | crc32 (u32) | sample id (u32) | payload`, little endian.
A kill -9 can only tear the last frame; readers stop before it, and the next writer truncates it away.
The sample id sits outside the payload so that listing what is stored never decompresses anything.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tracevote.core.errors import DataError

MAGIC = b"TVF1"
HEADER = struct.Struct("<4sIII")
MAX_PAYLOAD = 1 << 31


@dataclass(frozen=True)
class Frame:
    sample_id: int
    offset: int
    payload: memoryview | None  # a slice of the file read once; None when scanned without payloads


def scan(path: Path, *, with_payload: bool) -> tuple[list[Frame], int]:
    """The whole frames of a log, and the byte offset where the good part ends."""
    if not path.exists():
        return [], 0
    with open(path, "rb") as handle:
        if with_payload:
            return _scan_bytes(memoryview(handle.read()), check_every_crc=True)
        frames: list[Frame] = []
        size = os.fstat(handle.fileno()).st_size
        offset = 0
        while offset + HEADER.size <= size:
            magic, length, crc, sample_id = HEADER.unpack(_pread(handle, offset))
            end = offset + HEADER.size + length
            if magic != MAGIC or length > MAX_PAYLOAD or end > size:
                break
            if end == size and not _tail_crc_ok(handle, offset, length, crc):
                break  # the last frame is the only one a kill can tear: check it even when scanning
            frames.append(Frame(sample_id, offset, None))
            offset = end
    return frames, offset


def _scan_bytes(data: memoryview, *, check_every_crc: bool) -> tuple[list[Frame], int]:
    """`scan` of a log already in memory; payloads are slices of `data`, never copies."""
    frames: list[Frame] = []
    size, offset = len(data), 0
    while offset + HEADER.size <= size:
        magic, length, crc, sample_id = HEADER.unpack_from(data, offset)
        end = offset + HEADER.size + length
        if magic != MAGIC or length > MAX_PAYLOAD or end > size:
            break
        payload = data[offset + HEADER.size: end]
        if (check_every_crc or end == size) and zlib.crc32(payload) != crc:
            break
        frames.append(Frame(sample_id, offset, payload))
        offset = end
    return frames, offset


def _map(path: Path) -> memoryview:
    """The file's bytes, mapped: only the pages a reader touches are read, each once.

    The mapping lives as long as any slice of it; writers only append, or cut a torn tail that no
    reader decodes, so the mapped bytes never change under a reader.
    """
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ))


def _pread(handle: object, offset: int) -> bytes:
    return os.pread(handle.fileno(), HEADER.size, offset)  # type: ignore[attr-defined]


def _tail_crc_ok(handle: object, offset: int, length: int, crc: int) -> bool:
    payload = os.pread(handle.fileno(), length, offset + HEADER.size)  # type: ignore[attr-defined]
    return len(payload) == length and zlib.crc32(payload) == crc


class FrameWriter:
    """Appends frames to one log under an exclusive lock; truncates a torn tail when opened."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise DataError(f"{path}: another process is writing this pool") from None
        frames, good_end = scan(path, with_payload=False)
        self.torn_bytes = os.fstat(self._fd).st_size - good_end
        if self.torn_bytes:
            os.ftruncate(self._fd, good_end)
        self.sample_ids = {frame.sample_id for frame in frames}
        os.lseek(self._fd, good_end, os.SEEK_SET)

    def append(self, sample_id: int, payload: bytes) -> None:
        """Once this returns, a kill of this process cannot lose the frame (the OS holds the bytes)."""
        frame = memoryview(HEADER.pack(MAGIC, len(payload), zlib.crc32(payload), sample_id) + payload)
        while frame:
            frame = frame[os.write(self._fd, frame):]
        self.sample_ids.add(sample_id)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FrameWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_payloads(path: Path, *, check_every_crc: bool = True) -> Iterator[tuple[int, memoryview]]:
    """(sample id, payload) for every whole frame, first copy of each sample id only.

    The file is read once; payloads are slices of it. With `check_every_crc` False only the last
    frame's crc is checked (the one a kill can tear), for a reader that checks what it decodes by the
    payload's own checksums (codec format 2) and so need not read every byte.
    """
    if not path.exists():
        return
    frames, _ = _scan_bytes(_map(path), check_every_crc=check_every_crc)
    seen: set[int] = set()
    for frame in frames:
        if frame.sample_id not in seen and frame.payload is not None:
            seen.add(frame.sample_id)
            yield frame.sample_id, frame.payload
