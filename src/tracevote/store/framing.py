"""Append-only frame logs: the on-disk unit of the ledger (trace pools and every other paid call).

A frame is `magic | length (u32) | crc32 (u32) | key field (u32) | body`, little endian, keyed one of two ways:

    TVF1  the key is an integer (a trace's sample id) in the key field; the body is the payload
    TVK1  the key is text (a call key such as "r1/agent2"); the key field is its UTF-8 length, and
          the body is the key's bytes, then the payload; the crc covers both

A kill -9 can only tear the last frame; readers stop before it, and the next writer truncates it away.
The key sits outside the payload so that listing what is stored never decompresses anything.
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
            magic, length, crc, key_field = HEADER.unpack(_pread(handle, offset, HEADER.size))
            end = offset + HEADER.size + length
            if not _plausible(magic, length, key_field) or end > size:
                break
            if end == size and not _tail_crc_ok(handle, offset, length, crc):
                break  # the last frame is the only one a kill can tear: check it even when scanning
            key = key_field if magic == MAGIC else _pread(handle, offset + HEADER.size, key_field).decode()
            frames.append(Frame(key, offset, None))
            offset = end
    return frames, offset


def _scan_bytes(data: memoryview, *, check_every_crc: bool) -> tuple[list[Frame], int]:
    """`scan` of a log already in memory; payloads are slices of `data`, never copies."""
    frames: list[Frame] = []
    size, offset = len(data), 0
    while offset + HEADER.size <= size:
        magic, length, crc, key_field = HEADER.unpack_from(data, offset)
        end = offset + HEADER.size + length
        if not _plausible(magic, length, key_field) or end > size:
            break
        body = data[offset + HEADER.size: end]
        if (check_every_crc or end == size) and zlib.crc32(body) != crc:
            break
        if magic == MAGIC:
            frames.append(Frame(key_field, offset, body))
        else:
            frames.append(Frame(bytes(body[:key_field]).decode(), offset, body[key_field:]))
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


def _plausible(magic: bytes, length: int, key_field: int) -> bool:
    if magic == MAGIC:
        return length <= MAX_PAYLOAD
    return magic == KEYED_MAGIC and key_field <= min(length, MAX_KEY_BYTES) and length <= MAX_PAYLOAD


def _pread(handle: object, offset: int, size: int) -> bytes:
    return os.pread(handle.fileno(), size, offset)  # type: ignore[attr-defined]


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
            raise DataError(f"{path}: another process is writing this log (a second run of the same stage?)") from None
        frames, good_end = scan(path, with_payload=False)
        self.torn_bytes = os.fstat(self._fd).st_size - good_end
        if self.torn_bytes:
            os.ftruncate(self._fd, good_end)
        self.keys: set[Key] = {frame.key for frame in frames}
        os.lseek(self._fd, good_end, os.SEEK_SET)

    def append(self, key: Key, payload: bytes) -> None:
        """Once this returns, a kill of this process cannot lose the frame (the OS holds the bytes)."""
        frame = memoryview(_frame_bytes(key, payload))
        while frame:
            frame = frame[os.write(self._fd, frame):]
        self.keys.add(key)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FrameWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _frame_bytes(key: Key, payload: bytes) -> bytes:
    if isinstance(key, int):
        return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload), key) + payload
    key_bytes = key.encode()
    if not 0 < len(key_bytes) <= MAX_KEY_BYTES:
        raise ValueError(f"call key {key!r}: must be 1-{MAX_KEY_BYTES} bytes of UTF-8")
    body = key_bytes + payload
    return HEADER.pack(KEYED_MAGIC, len(body), zlib.crc32(body), len(key_bytes)) + body


def iter_payloads(path: Path, *, check_every_crc: bool = True) -> Iterator[tuple[Key, memoryview]]:
    """(key, payload) for every whole frame, first copy of each key only.

    The file is read once; payloads are slices of it. With `check_every_crc` False only the last
    frame's crc is checked (the one a kill can tear), for a reader that checks what it decodes by the
    payload's own checksums (codec format 2) and so need not read every byte.
    """
    if not path.exists():
        return
    frames, _ = _scan_bytes(_map(path), check_every_crc=check_every_crc)
    seen: set[Key] = set()
    for frame in frames:
        if frame.key not in seen and frame.payload is not None:
            seen.add(frame.key)
            yield frame.key, frame.payload
