"""Append-only frame logs: the on-disk unit of a pool.

A frame is `magic | payload length (u32) | crc32 (u32) | sample id (u32) | payload`, little endian.
A kill -9 can only tear the last frame; readers stop before it, and the next writer truncates it away.
The sample id sits outside the payload so that listing what is stored never decompresses anything.
"""

from __future__ import annotations

import fcntl
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tracevote.errors import DataError

MAGIC = b"TVF1"
HEADER = struct.Struct("<4sIII")
MAX_PAYLOAD = 1 << 31


@dataclass(frozen=True)
class Frame:
    sample_id: int
    offset: int
    payload: bytes | None  # None when scanned without reading payloads


def scan(path: Path, *, with_payload: bool) -> tuple[list[Frame], int]:
    """The whole frames of a log, and the byte offset where the good part ends."""
    frames: list[Frame] = []
    if not path.exists():
        return frames, 0
    with open(path, "rb") as handle:
        data = handle.read() if with_payload else None
        size = os.fstat(handle.fileno()).st_size
        offset = 0
        while offset + HEADER.size <= size:
            head = data[offset: offset + HEADER.size] if data is not None else _pread(handle, offset)
            magic, length, crc, sample_id = HEADER.unpack(head)
            end = offset + HEADER.size + length
            if magic != MAGIC or length > MAX_PAYLOAD or end > size:
                break
            payload = None
            if data is not None:
                payload = data[offset + HEADER.size: end]
                if zlib.crc32(payload) != crc:
                    break
            elif end == size and not _tail_crc_ok(handle, offset, length, crc):
                break  # the last frame is the only one a kill can tear: check it even when scanning
            frames.append(Frame(sample_id, offset, payload))
            offset = end
    return frames, offset


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


def iter_payloads(path: Path) -> Iterator[tuple[int, bytes]]:
    """(sample id, payload) for every whole frame, first copy of each sample id only."""
    frames, _ = scan(path, with_payload=True)
    seen: set[int] = set()
    for frame in frames:
        if frame.sample_id not in seen and frame.payload is not None:
            seen.add(frame.sample_id)
            yield frame.sample_id, frame.payload
