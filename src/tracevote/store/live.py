"""The ledgers of a live online run: its warmup traces, and each method's streamed traces, with how each ended.

    online/<dataset>/<model>-<fingerprint>/live.json        the setting (what decides what is generated)
    online/<dataset>/<model>-<fingerprint>/items.json       problem id -> sha256 of its prompt
    online/<dataset>/<model>-<fingerprint>/calls/<id>.tvf   one frame per trace, keyed by its index

The warmup ledger's setting is the pool's (model, prompt, decoding): its traces are generated in full, whatever
the method. A method's ledger adds what decides where its traces stop and how many are started: the window,
the warmup, the percentile, the budget and the consensus share. Changing any of them starts a new ledger beside
the old one; switching back finds the old one.

A frame's payload is `b"TVL1" | u32 header length | header JSON | codec payload`: the header says how the
trace ended and what it was billed for (LiveTrace), the codec payload holds the trace as kept (store.codec; a
stopped trace is kept up to and including the token it stopped at, without its top-k).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from tracevote.core.errors import DataError
from tracevote.core.fileio import read_json_record, write_json
from tracevote.core.names import recorded_path
from tracevote.store import codec
from tracevote.store.ledger import Ledger, fingerprint_of, folder_name
from tracevote.store.records import Sample

LIVE_FORMAT = 1
MAGIC = b"TVL1"
_HEAD = struct.Struct("<4sI")
StopReason = Literal["finished", "length", "confidence", "consensus-cancelled"]
STOP_REASONS: tuple[str, ...] = ("finished", "length", "confidence", "consensus-cancelled")
UsageSource = Literal["server", "client"]


@dataclass(frozen=True, eq=False)
class LiveTrace:
    """One trace of a live run as it ended.

    `sample` holds the tokens kept: all of them, or those up to and including the token the trace stopped at
    (`received` counts every token that arrived, some after that one). Billing: `prompt_tokens` and
    `completion_tokens` are the server's usage when it sent one (usage_source "server"); otherwise the completion
    tokens are those received, counted by the client, and the prompt tokens are unknown (None). A trace whose
    stream broke and was asked again counts those attempts apart: `failed_attempts` of them, `failed_tokens`
    received on them (billed as received), their price in `usd`.
    """

    sample: Sample
    stop_reason: StopReason
    received: int
    prompt_tokens: int | None
    completion_tokens: int
    usage_source: UsageSource
    threshold: float | None  # the stop threshold the trace was streamed under; None for a warmup trace
    simulated: bool = False  # tracevote's simulator answered (read back from the stored payload)
    usd: float = 0.0  # priced when stored: the server's usage, else the tokens received and the prompt estimated
    # (the failed attempts' prompts and tokens included)
    # the server's finish_reason had arrived when the client closed the stream (a stop that saved the server
    # nothing); None: stored before tracevote recorded it
    server_finished: bool | None = None
    failed_attempts: int = 0  # attempts whose stream broke before this one (each asked again from its start)
    failed_tokens: int = 0  # completion tokens received on them: billed, counted by the client

    @property
    def index(self) -> int:
        return self.sample.sample_id

    def header(self) -> dict[str, Any]:
        return {"stop_reason": self.stop_reason, "received": self.received, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "usage_source": self.usage_source,
                "threshold": self.threshold, "usd": self.usd, "server_finished": self.server_finished,
                "failed_attempts": self.failed_attempts, "failed_tokens": self.failed_tokens}


def encode(trace: LiveTrace, *, simulated: bool) -> bytes:
    header = orjson.dumps(trace.header(), option=orjson.OPT_SERIALIZE_NUMPY)
    return _HEAD.pack(MAGIC, len(header)) + header + codec.encode(trace.sample, simulated=simulated)


def decode(payload: bytes | memoryview, where: str) -> LiveTrace:
    """A stored trace; `where` (its log and key) names it in the error a damaged payload raises."""
    view = memoryview(payload)
    try:
        magic, size = _HEAD.unpack_from(view)
        if magic != MAGIC:
            raise ValueError(f"magic {bytes(magic)!r}")
        header = orjson.loads(view[_HEAD.size:_HEAD.size + size])
        decoded = codec.decode(view[_HEAD.size + size:])
        return LiveTrace(sample=codec.to_sample(decoded), stop_reason=header["stop_reason"],
                         received=int(header["received"]), prompt_tokens=header["prompt_tokens"],
                         completion_tokens=int(header["completion_tokens"]), usage_source=header["usage_source"],
                         threshold=header["threshold"], simulated=bool(decoded.header.get("simulated")),
                         usd=float(header["usd"]),
                         server_finished=header.get("server_finished"),  # absent from traces stored before it
                         failed_attempts=int(header.get("failed_attempts", 0)),  # ... and these before retries
                         failed_tokens=int(header.get("failed_tokens", 0)))
    except (ValueError, KeyError, TypeError, struct.error, orjson.JSONDecodeError) as exc:
        raise DataError(f"{where}: not a live trace ({exc})") from None


class LiveLedger(Ledger):
    """A live run's ledger: items are problems, keys trace indices, records LiveTraces."""

    META = "live.json"  # not ledger.json: a tool telling ledgers apart by it reads these traces as such
    FORMAT = LIVE_FORMAT

    def traces(self, problem_id: str) -> dict[int, LiveTrace]:
        """The problem's stored traces by index (none when its log does not exist yet)."""
        path = self.log_path(problem_id)
        if not path.is_file():
            return {}
        return {int(key): decode(payload, f"{path} trace {key}") for key, payload in self.iter_payloads(problem_id)}


def warmup_setting(pool_setting: Mapping[str, Any]) -> dict[str, Any]:
    """The warmup ledger's setting: the pool's (its traces are generated in full, whatever the method)."""
    return {"part": "warmup", **pool_setting}


def method_setting(pool_setting: Mapping[str, Any], *, percentile: float, group_size: int, warmup: int,
                   budget: int, consensus: float | None, token: str = "deepconf",
                   top_k: int | None = None) -> dict[str, Any]:
    """A method's ledger setting: the pool's, and what decides where its traces stop and how many start (the token
    signal and its k only when not DeepConf's C_i, so ledgers from before them keep their folder)."""
    signal = {} if (token, top_k) == ("deepconf", None) else {"token": token, "top_k": top_k}
    return {"part": "stream", **pool_setting, "percentile": percentile, "group_size": group_size,
            "warmup": warmup, "budget": budget, "consensus": consensus, **signal}


def ledger_root(folder: Path, prefix: str, setting: Mapping[str, Any], *, simulated: bool) -> Path:
    """Where the ledger of `setting` lives under `folder`: `<prefix>-<model>-<fingerprint>`."""
    return folder / f"{prefix}-{folder_name(str(setting['model']), fingerprint_of(setting), simulated=simulated)}"


def open_ledger(folder: Path, prefix: str, setting: Mapping[str, Any], *, simulated: bool) -> LiveLedger:
    """The ledger of `setting` under `folder`, created when absent."""
    return LiveLedger.open_at(ledger_root(folder, prefix, setting, simulated=simulated), setting, simulated=simulated)


@dataclass(frozen=True)
class LiveManifest:
    """build_online's small git-tracked summary: the ledgers the later stages read, and how full they are."""

    dataset: str
    warmup_ledger: str  # relative to the manifest's folder
    method_ledgers: dict[str, str]  # method name -> ledger folder, relative to the manifest's folder
    problems: list[str]
    warmup: int
    budget: int
    percentiles: dict[str, float]
    group_size: int
    consensus: float | None
    traces: int  # stored, every ledger
    simulated: bool
    setting: dict[str, Any]  # the pool's setting (model, prompt, decoding) the traces were generated under
    answers: dict[str, Any]  # the `answers:` rules the consensus check read answers by
    token: str = "deepconf"  # confidence.token: the per-token signal the stop rule averaged
    top_k: int | None = None  # confidence.top_k

    def root(self, manifest_path: Path, relative: str) -> Path:
        return recorded_path(manifest_path.parent, relative, source=manifest_path)


def write_manifest(path: Path, manifest: LiveManifest) -> None:
    write_json(path, asdict(manifest))


def read_manifest(path: Path) -> LiveManifest:
    return read_json_record(path, LiveManifest, what="live run manifest",
                            missing="run `dvc repro build_online@<dataset>` (or `dvc pull` its outputs)")
