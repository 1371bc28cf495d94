"""Paid calls: what identifies one (Call), and the ledger of those that are not sampled traces.

A CallLedger stores debate turns, rankings, critiques and grades, one CallRecord per call. Payload:
`b"TVR1" | u32 JSON length | zstd(JSON of the record)`. The record keeps what the response said (text,
finish reason, usage) and what it cost, plus the sha256 of the request it answered, so a replay that
would now build a different request (a changed prompt builder) is caught instead of trusted.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from tracevote.core.errors import DataError
from tracevote.core.fileio import read_json_record
from tracevote.core.names import recorded_path
from tracevote.store import framing
from tracevote.store.framing import Frame, Key
from tracevote.store.ledger import Ledger
from tracevote.store.zstd import zstd_codec

MAGIC = b"TVR1"
_HEAD = struct.Struct("<4sI")


@dataclass(frozen=True)
class Call:
    """One request of a paid stage: which item, which call of it, what kind (the simulator answers by kind),
    and the messages. Its identity in the ledger is (ledger setting, item_id, key)."""

    item_id: str
    key: Key
    kind: str
    messages: list[dict[str, str]]
    max_tokens: int | None = None  # None: the setting's
    extra: dict[str, Any] | None = None  # more fields of the request body (a response_format); None: none
    # the keys of further calls this one request answers (n samples sharing one prefill), each stored as its own
    shared_with: tuple[Key, ...] = ()

    @property
    def keys(self) -> tuple[Key, ...]:
        """Every call this request answers: its own key, then shared_with's."""
        return (self.key, *self.shared_with)

    @property
    def request_sha256(self) -> str:
        """sha256 of what decides the request besides the setting (which names the ledger). `extra` counts only
        when set, so the calls stored before it existed keep their digest."""
        document: dict[str, Any] = {"kind": self.kind, "messages": self.messages, "max_tokens": self.max_tokens}
        if self.extra is not None:
            document["extra"] = self.extra
        return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


CONTEXT_EXCEEDED = "context_length_exceeded"  # the finish reason of a call the server refused as too long


@dataclass(frozen=True)
class CallRecord:
    """What one paid call returned. `usd` is priced when stored, at the cache-hit price for cached input."""

    key: str
    kind: str
    request_sha256: str
    text: str
    finish_reason: str
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    usd: float
    latency_s: float
    simulated: bool = False  # answered by tracevote's simulator; records stored before this field was kept lack it
    reasoning_tokens: int = 0  # hidden reasoning (OpenAI's reasoning models), part of completion_tokens; older lack it

    @property
    def failed_for_context(self) -> bool:
        """The server refused the call as longer than the model's context window: no text, nothing billed."""
        return self.finish_reason == CONTEXT_EXCEEDED


def encode(record: CallRecord) -> bytes:
    data = orjson.dumps(asdict(record))
    return _HEAD.pack(MAGIC, len(data)) + zstd_codec().compress(data, asbytes=True)


def decode(payload: bytes | memoryview) -> CallRecord:
    """The record, or DataError naming what is wrong with the payload."""
    if len(payload) < _HEAD.size:
        raise DataError(f"call record: {len(payload)} bytes is too short")
    magic, size = _HEAD.unpack_from(payload)
    if magic != MAGIC:
        raise DataError(f"call record: unknown magic {bytes(magic)!r} (expected {MAGIC!r})")
    document = orjson.loads(zstd_codec().decompress(payload[_HEAD.size:], decompressed_size=size, asbytes=True))
    return _record(document)


_ADDED_LATER = frozenset({"simulated", "reasoning_tokens"})  # fields records stored before them lack


def _record(document: Any) -> CallRecord:
    names = {f.name for f in fields(CallRecord)}
    required = names - _ADDED_LATER
    if not isinstance(document, dict) or not required <= set(document) <= names:
        got = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise DataError(f"call record: fields {got} are not {sorted(names)}")
    return CallRecord(**document)


def _checked(path: Path, frame: Frame) -> CallRecord:
    """The frame's record; one naming another key than its frame is damage (a key length the crc missed)."""
    record = decode(frame.payload)  # type: ignore[arg-type]
    if record.key != str(frame.key):  # records keep their key as text; critiques key frames by vote number
        raise framing.damaged(path, frame.offset, f"the frame's key says {frame.key!r}, its record {record.key!r}")
    return record


class CallLedger(Ledger):
    """A ledger of CallRecords. Replaying a stored call checks it answered the request built now."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._read: dict[str, dict[Key, CallRecord]] = {}

    def records(self, item_id: str) -> dict[Key, CallRecord]:
        """Every stored record of one item by call key, read once per ledger object."""
        if item_id not in self._read:
            log = self.log_path(item_id)  # checked once, not once a frame (it resolves every folder)
            self._read[item_id] = {frame.key: _checked(log, frame) for frame in framing.iter_frames(log)}
        return self._read[item_id]

    def load(self, call: Call) -> CallRecord:
        record = self.records(call.item_id).get(call.key)
        if record is None:
            raise DataError(f"{self.log_path(call.item_id)}: call {call.key!r} is not stored")
        if record.request_sha256 != call.request_sha256:
            raise DataError(
                f"{self.log_path(call.item_id)}: the stored call {call.key!r} answered another request than the "
                f"one built now (the prompt builder changed without changing the setting?); nothing was sent")
        return record


def ledger_fields(manifest_path: Path, ledger: CallLedger) -> dict[str, Any]:
    """What a paid stage's manifest says of its ledger: where it is, relative to the manifest, its fingerprint,
    whether the simulator answered, and its setting."""
    return {"ledger": str(ledger.root.relative_to(manifest_path.parent)), "fingerprint": ledger.fingerprint,
            "simulated": ledger.simulated, "setting": ledger.meta["setting"]}


def finished_ledger(manifest_path: Path, recorded: str, finished: int, total: int, unfinished: str) -> CallLedger:
    """The ledger a manifest names (`recorded`, checked to lie beside it); DataError `unfinished` (what is missing
    and the stage that builds it) when fewer than `total` items are finished."""
    if finished < total:
        raise DataError(f"{manifest_path}: only {finished} of {total} {unfinished}")
    return CallLedger(recorded_path(manifest_path.parent, recorded, source=manifest_path))


class _LedgerManifest(Protocol):
    ledger: str  # the ledger's folder, relative to the manifest
    finished: int  # items with every call stored


ManifestT = TypeVar("ManifestT", bound=_LedgerManifest)


def load_finished_ledger(manifest_path: Path, record: type[ManifestT], *, what: str,
                         total: Callable[[ManifestT], int],
                         unfinished: Callable[[ManifestT], str]) -> tuple[ManifestT, CallLedger]:
    """A paid stage's manifest (a `record`, of `what`: "debate", "critique") and the ledger it names; an
    unfinished build is a DataError saying what is missing and what to run (`unfinished`)."""
    manifest = read_json_record(manifest_path, record, what=f"{what} manifest",
                                missing=f"run `make repro`, which pulls or builds the {what}s")
    ledger = finished_ledger(manifest_path, manifest.ledger, manifest.finished, total(manifest), unfinished(manifest))
    return manifest, ledger
