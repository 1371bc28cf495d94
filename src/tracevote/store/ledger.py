"""The durable ledger of paid calls: every response a paid stage receives, stored the moment it arrives.

A call is identified by (setting fingerprint, item id, call key). One folder per (dataset, setting) of
a stage, one append-only frame log per item (a problem, a debate, a solution to critique):

    <stage dir>/<name>/ledger.json        format, the setting and its fingerprint, simulated or not
    <stage dir>/<name>/items.json         item id -> sha256 of what its requests are built from
    <stage dir>/<name>/calls/<item>.tvf   one frame per call, keyed by its call key (see framing); <item> is
                                          the item id through core.names.safe_name

Trace pools are ledgers whose records are sampled traces (tracevote.store.pool, same format, older
file names); every other stage stores CallRecords (tracevote.store.calls). The setting decides the
folder, so changing it starts a new ledger beside the old one and switching back finds the old one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import orjson

from tracevote.core.errors import DataError
from tracevote.core.fileio import write_json
from tracevote.core.names import inside
from tracevote.store import frame_writer, framing, layout
from tracevote.store.framing import Key

LEDGER_FORMAT = 1
L = TypeVar("L", bound="Ledger")
LOG_SUFFIX = layout.LOG_SUFFIX
MODEL_SLUG_MAX = 80


def canonical_json(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def fingerprint_of(setting: Mapping[str, Any]) -> str:
    """sha256 of the setting's canonical JSON, first 16 hex digits."""
    return hashlib.sha256(canonical_json(dict(setting)).encode()).hexdigest()[:16]


def folder_name(model: str, fingerprint: str, *, simulated: bool) -> str:
    """"deepseek-v4-flash-0123456789ab"; a simulated ledger is named for what made it, never for the
    real model it stands in for: "simulated-0123456789ab". The model name is input: only its first
    MODEL_SLUG_MAX safe characters name the folder (the fingerprint, which covers the whole name, tells
    models apart), so it is never a separator, never "." or "..", and never too long to be a file name."""
    if simulated:
        return f"simulated-{fingerprint[:12]}"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model)[:MODEL_SLUG_MAX].strip("-") or "model"
    return f"{slug}-{fingerprint[:12]}"


class Ledger:
    """A ledger folder. Reading never needs a lock; writing one item's log takes an exclusive one."""

    META: ClassVar[str] = "ledger.json"
    ITEMS: ClassVar[str] = "items.json"
    LOGS: ClassVar[str] = "calls"
    FORMAT: ClassVar[int] = LEDGER_FORMAT

    def __init__(self, root: Path) -> None:
        self.refuse_bad_layout(root)
        meta_path = root / self.META
        if not meta_path.is_file():
            raise DataError(f"{root}: not a {self._what()} (no {self.META})")
        self.root = root
        self.meta: dict[str, Any] = orjson.loads(meta_path.read_bytes())
        if self.meta.get("format") != self.FORMAT:
            raise DataError(f"{meta_path}: unknown {self._what()} format {self.meta.get('format')!r}")

    @classmethod
    def _what(cls) -> str:
        return cls.__name__.lower()

    @classmethod
    def open_at(cls: type[L], root: Path, setting: Mapping[str, Any], *, simulated: bool) -> L:
        """The ledger at `root` for `setting`, created empty when absent; a different setting there is an error."""
        fingerprint = fingerprint_of(setting)
        if not (root / cls.META).is_file():
            cls.refuse_bad_layout(root)  # before writing anything (an existing ledger's is checked on opening it)
            write_json(root / cls.ITEMS, {})
            write_json(root / cls.META, {"format": cls.FORMAT, "fingerprint": fingerprint,
                                         "setting": dict(setting), "simulated": simulated})
        ledger = cls(root)
        if ledger.meta["fingerprint"] != fingerprint:
            raise DataError(f"{root}/{cls.META}: fingerprint {ledger.meta['fingerprint']} does not match "
                            f"the setting's {fingerprint}")
        if simulated and not ledger.simulated:
            ledger.check_kind(simulated=True)
        return ledger

    @classmethod
    def layout_problems(cls, root: Path) -> list[str]:
        """What is misplaced in the ledger folder at `root` (store.layout), one line each: what every stage refuses
        and `ledger verify` reports."""
        return layout.layout_problems(root, meta=cls.META, items=cls.ITEMS, folders=cls.file_folders())

    @classmethod
    def file_folders(cls) -> tuple[tuple[str, str], ...]:
        """(folder, suffix of its files) for each folder of files the ledger keeps: its logs."""
        return ((cls.LOGS, LOG_SUFFIX),)

    @classmethod
    def refuse_bad_layout(cls, root: Path) -> None:
        problems = cls.layout_problems(root)
        if problems:
            raise DataError(problems[0])

    @property
    def fingerprint(self) -> str:
        return str(self.meta["fingerprint"])

    @property
    def simulated(self) -> bool:
        return bool(self.meta.get("simulated"))

    def check_kind(self, simulated: bool) -> None:
        """Real and simulated replies never share a ledger: the first stored call fixes its kind, and a reply
        of the other kind is refused (DataError) before anything of it is stored."""
        if simulated == self.simulated:
            return
        if self.holds_calls():
            held, got = ("simulated", "a real model") if self.simulated else ("real", "tracevote's simulator")
            raise DataError(
                f"{self.root}: this ledger holds {held} replies, but {got} answered; real and simulated calls "
                f"never share a ledger. Point the endpoint back at the server that built it, or move the folder "
                f"away to start a new ledger (nothing of this reply was stored)")
        self.meta = {**self.meta, "simulated": simulated}
        write_json(self.root / self.META, self.meta)

    def holds_calls(self) -> bool:
        logs = self.root / self.LOGS
        return logs.is_dir() and any(log.stat().st_size > 0 for log in logs.glob(f"*{LOG_SUFFIX}"))

    def log_path(self, item_id: str) -> Path:
        """The item's log: its id made a file name by the one safe-name function, checked to lie in the folder."""
        return inside(self.root / self.LOGS, item_id, LOG_SUFFIX)

    def register_digests(self, digests: Mapping[str, str], *, what: str = "input") -> None:
        """Record each item's input digest (of its prompt, say); a changed one under a known id is an error."""
        known: dict[str, str] = orjson.loads((self.root / self.ITEMS).read_bytes())
        for item_id, digest in digests.items():
            if known.get(item_id, digest) != digest:
                raise DataError(f"{item_id}: its {what} differs from the one stored in {self.root}; "
                                f"give the changed item a new id, or use a new dataset name")
        merged = {**known, **digests}
        if merged != known:
            write_json(self.root / self.ITEMS, merged)

    def item_ids(self) -> list[str]:
        return sorted(orjson.loads((self.root / self.ITEMS).read_bytes()))

    def stored_keys(self, item_id: str, *, check_every_crc: bool = False) -> set[Key]:
        """The keys stored for an item. Listing reads only frame headers (and the last frame); with
        `check_every_crc` every byte is checked, so a damaged log is refused rather than counted."""
        state = framing.survey(self.log_path(item_id), check_every_crc=check_every_crc, keep_payloads=False)
        return {frame.key for frame in state.check().frames}

    def missing(self, wanted: Mapping[str, Iterable[Key]]) -> dict[str, list[Key]]:
        """The wanted keys not yet stored, per item (items with none missing left out). Every byte of every log
        is checked (~0.1 s per 200 MiB), so a paid stage meets damage before it pays for anything."""
        result = {}
        for item_id, keys in wanted.items():
            stored = self.stored_keys(item_id, check_every_crc=True)
            todo = [key for key in keys if key not in stored]
            if todo:
                result[item_id] = todo
        return result

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the ledger's run lock (flock on its folder) for a whole run, so a second run of the same stage stops
        before it pays for anything, a probe included; each log also has its own writer lock (framing)."""
        fd = os.open(self.root, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataError(f"{self.root}: another process is running a stage on this {self._what()} (a second run "
                            f"of the same stage?); nothing was sent. Wait for it to end, then run again") from None
        try:
            yield
        finally:
            os.close(fd)

    def writer(self, item_id: str) -> frame_writer.FrameWriter:
        return frame_writer.FrameWriter(self.log_path(item_id))

    def iter_payloads(self, item_id: str) -> Iterator[tuple[Key, memoryview]]:
        return framing.iter_payloads(self.log_path(item_id))
