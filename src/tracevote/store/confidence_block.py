"""Each problem's confidences in one contiguous block beside its log, so scoring reads a problem in one call.

    <pool>/confidence/<id>.tvc   b"TVB1" | u32 header length | u64 xxh3 of the header | header JSON |
                                 zero padding to a multiple of 64 bytes | C_i of every sample, flat, in sample-id order

The header holds what scoring reads besides C_i (a ProblemTraces: sample ids, token offsets, finish reasons,
answer candidates and the EXTRACT_VERSION that found them), the dtype C_i was read as, the log it was made from
(`LogStamp`), and `prefix_digests[k]`, the xxh3 of the first k samples' values: reading samples 0..n-1 checks
exactly the bytes it reads, with one call (xxh3 hashes ~10 GB/s, crc32 ~1 GB/s: 4 bytes a token made crc32 a
sixth of the stage's time).

A block is derived data; the log stays the record. It is in step with its log when the log is as long as when
the block was written and its last frame header (length, crc of the payload, key) is the one recorded: a log only
grows by whole frames, or is cut back by repair, so its length and last frame identify its content. `read_block`
uses a block only then and returns None otherwise (missing, stale, from another EXTRACT_VERSION, or failing its
checksums), and the caller reads the log frame by frame; `ledger verify` checks every block against its log.
`write_block` writes a temporary file, fsyncs it and renames it over the block, so a kill -9 leaves the old
block or the new one, never part of one (a leftover temporary file is overwritten by the next write).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson
import xxhash

from tracevote.answers.extract import EXTRACT_VERSION, AnswerCandidates
from tracevote.store import frame_writer, framing
from tracevote.store.records import ProblemTraces

FOLDER = "confidence"
SUFFIX = ".tvc"
MAGIC = b"TVB1"
FORMAT_VERSION = 1
HEAD = struct.Struct("<4sIQ")  # magic, header length, xxh3 of the header
ALIGN = 64  # the values start on a cache line, so numpy reads them aligned
TEMPORARY = ".writing"
# populated: the page tables filled in the one mmap call, not one fault per page as the digest walks the values
MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


@dataclass(frozen=True)
class LogStamp:
    """Which log a block was made from: its length and its last frame's header (16 bytes, crc included)."""

    size: int
    last_frame: int  # offset of the last frame
    last_header: bytes

    def to_json(self) -> list[object]:
        return [self.size, self.last_frame, self.last_header.hex()]

    @classmethod
    def from_json(cls, value: list[object]) -> LogStamp:
        size, last_frame, last_header = value
        return cls(int(size), int(last_frame), bytes.fromhex(str(last_header)))  # type: ignore[call-overload]


def stamp_of(state: framing.LogState) -> LogStamp | None:
    """The stamp of a surveyed log; None when it has no frame, or a torn tail (no block is in step with that)."""
    if not state.frames or state.torn_bytes or state.damage is not None:
        return None
    last = state.frames[-1].offset
    with open(state.path, "rb") as handle:
        header = os.pread(handle.fileno(), framing.HEADER.size, last)
    return LogStamp(state.good_end, last, header)


def in_step(stamp: LogStamp, log: Path) -> bool:
    """Whether `log` is still the log `stamp` was taken of (a stat and one 16-byte read)."""
    try:
        with open(log, "rb") as handle:
            if os.fstat(handle.fileno()).st_size != stamp.size:
                return False
            return os.pread(handle.fileno(), framing.HEADER.size, stamp.last_frame) == stamp.last_header
    except FileNotFoundError:
        return False


def write_block(path: Path, traces: ProblemTraces, stamp: LogStamp) -> None:
    """Write `traces` (every sample of a log, sorted by sample id) as the block at `path`, atomically.

    The caller holds the log's writer lock, so no one appends while the block is made and no two writers
    share the temporary file."""
    values = np.ascontiguousarray(traces.token_confidence)
    offsets = np.asarray(traces.offsets, dtype=np.int64)
    header = orjson.dumps({
        "v": FORMAT_VERSION, "problem_id": traces.problem_id, "log": stamp.to_json(), "dtype": values.dtype.str,
        "extract_version": EXTRACT_VERSION, "sample_ids": np.asarray(traces.sample_ids, dtype=np.int64).tolist(),
        "offsets": offsets.tolist(), "finish_reasons": list(traces.finish_reasons),
        "candidates": [c.to_json() for c in traces.candidates],
        "prefix_digests": _prefix_digests(values, offsets),
    })
    head = HEAD.pack(MAGIC, len(header), xxhash.xxh3_64_intdigest(header))
    padding = b"\0" * (-(len(head) + len(header)) % ALIGN)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + TEMPORARY)
    with open(temporary, "wb") as handle:
        handle.write(b"".join([head, header, padding]))
        handle.write(memoryview(values).cast("B"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    frame_writer.fsync_folder(path.parent)


def _prefix_digests(values: np.ndarray, offsets: np.ndarray) -> list[int]:
    """[xxh3 of values[:offsets[k]] for k = 0..n]: one streaming pass, a digest taken at each sample's end."""
    hasher = xxhash.xxh3_64()
    digests = [hasher.intdigest()]
    data = memoryview(values).cast("B")
    size = values.dtype.itemsize
    for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        hasher.update(data[start * size:end * size])
        digests.append(hasher.intdigest())
    return digests


class BlockError(ValueError):
    """A block that cannot be read as one: cut short, or failing a checksum."""


def read_block(path: Path, log: Path, problem_id: str, n_pool: int) -> ProblemTraces | None:
    """Samples 0..n_pool-1 of the block at `path`, when it is in step with `log`; else None (read the log).

    The values are a read-only view of the mapped file (one mmap, pages populated at once), checked by one
    digest over exactly the bytes read."""
    try:
        with open(path, "rb") as handle:
            header, data_start = _header(handle)
            if (header["problem_id"] != problem_id or header["extract_version"] != EXTRACT_VERSION
                    or not in_step(LogStamp.from_json(header["log"]), log)):
                return None
            return _traces(handle, header, data_start, n_pool)
    except (FileNotFoundError, BlockError):
        return None


def _header(handle: BinaryIO) -> tuple[dict[str, Any], int]:
    """The block's header and the offset of its values; BlockError when cut short or corrupt."""
    head = handle.read(HEAD.size)
    if len(head) != HEAD.size:
        raise BlockError(f"{len(head)} bytes: too short for a block header")
    magic, length, digest = HEAD.unpack(head)
    if magic != MAGIC:
        raise BlockError(f"not a confidence block (starts with {magic!r})")
    raw = handle.read(length)
    if len(raw) != length or xxhash.xxh3_64_intdigest(raw) != digest:
        raise BlockError("its header is cut short or corrupt (checksum mismatch)")
    header = orjson.loads(raw)
    if header.get("v") != FORMAT_VERSION:
        raise BlockError(f"unknown block format version {header.get('v')!r}")
    return header, HEAD.size + length + (-(HEAD.size + length) % ALIGN)


def _traces(handle: BinaryIO, header: dict[str, Any], data_start: int, n_pool: int) -> ProblemTraces:
    """Samples 0..n_pool-1 (a prefix: the block is in sample-id order), their values checked by one digest."""
    sample_ids = np.asarray(header["sample_ids"], dtype=np.int64)
    count = int(np.searchsorted(sample_ids, n_pool))
    offsets = np.asarray(header["offsets"][:count + 1], dtype=np.int64)
    dtype = np.dtype(header["dtype"])
    end = data_start + int(offsets[-1]) * dtype.itemsize
    values = np.empty(0, dtype=dtype)
    values.flags.writeable = False  # as the mapped values are
    if offsets[-1]:
        try:
            mapped = mmap.mmap(handle.fileno(), end, flags=MAP_FLAGS, prot=mmap.PROT_READ)
        except ValueError as exc:  # the file is shorter than its header says
            raise BlockError(f"its values are cut short ({exc})") from None
        if xxhash.xxh3_64_intdigest(memoryview(mapped)[data_start:end]) != header["prefix_digests"][count]:
            raise BlockError(f"the values of its first {count} samples fail their checksum")
        values = np.frombuffer(mapped, dtype=dtype, count=int(offsets[-1]), offset=data_start)
    return ProblemTraces(
        problem_id=header["problem_id"], sample_ids=sample_ids[:count],
        candidates=[AnswerCandidates.from_json(c) for c in header["candidates"][:count]],
        finish_reasons=header["finish_reasons"][:count], offsets=offsets, token_confidence=values)


def check_block(path: Path, log: Path, expected: ProblemTraces) -> str | None:
    """What is wrong with the block at `path` (None when nothing): `ledger verify`'s check, every byte read and
    compared with `expected`, what the log holds (every sample, by sample id)."""
    try:
        with open(path, "rb") as handle:
            header, data_start = _header(handle)
            if not in_step(LogStamp.from_json(header["log"]), log):
                return f"stale: {log.name} has changed since the block was written"
            traces = _traces(handle, header, data_start, n_pool=1 << 62)
    except BlockError as exc:
        return f"damaged: {exc}"
    except (OSError, KeyError, TypeError, ValueError) as exc:
        return f"unreadable ({exc})"
    if header["extract_version"] != EXTRACT_VERSION:
        return f"stale: its answers were extracted by version {header['extract_version']}, not {EXTRACT_VERSION}"
    return _difference(traces, expected)


def _difference(found: ProblemTraces, expected: ProblemTraces) -> str | None:
    checks = {
        "problem id": found.problem_id == expected.problem_id,
        "sample ids": np.array_equal(found.sample_ids, expected.sample_ids),
        "token offsets": np.array_equal(found.offsets, expected.offsets),
        "confidences": found.token_confidence.dtype == expected.token_confidence.dtype
        and np.array_equal(found.token_confidence, expected.token_confidence, equal_nan=True),
        "finish reasons": list(found.finish_reasons) == list(expected.finish_reasons),
        "answer candidates": list(found.candidates) == list(expected.candidates),
    }
    wrong = [name for name, ok in checks.items() if not ok]
    return f"differs from its log in its {', '.join(wrong)}" if wrong else None


def leftover(path: Path) -> bool:
    """Whether `path` is a temporary file a killed write left (the next write replaces it)."""
    return path.name.endswith(SUFFIX + TEMPORARY)
