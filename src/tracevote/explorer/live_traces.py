"""A live online run's traces on the explorer's trace pages (`#/pool/<N>/p/<i>/t/<index>?live=<m>`): the warmup's
and each live method's traces of a problem, each with where the run did stop it.

A live run (stage build_online@<dataset>, online/<dataset>.json and its ledgers) streams its own traces, apart
from the pool's: its warmup traces run in full, then each method's stream is closed at the first window whose
mean confidence falls below the method's threshold, and is kept up to and including that token (store.live). Its
trace pages show them with the live run's own window and token signal (the manifest's), the threshold the trace
was streamed under, and where it stopped (`trace_data.live_stop`); the curve and colours as trace_data computes
them for a pool's trace. Files: data/pool<N>/p<i>/l<m>_c<j>.js and l<m>_c<j>_top.js, m the ledger's number
(0 the warmup, then online.live.methods in the manifest's order).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracevote.core.config import Params
from tracevote.explorer.sitefiles import SiteWriter
from tracevote.explorer.trace_data import CHUNK, Window, live_stop, top_chunk, top_record, trace_record
from tracevote.store.live import LiveLedger, LiveManifest, LiveTrace, read_manifest

WARMUP = "warmup"


@dataclass(frozen=True, eq=False)
class LiveSource:
    """A live run's ledgers (the warmup's first, then each method's by name) and the confidence settings it ran
    under."""

    manifest: LiveManifest
    ledgers: list[tuple[str, LiveLedger]]
    confidence: Window


def live_manifest_path(dataset: str) -> Path:
    """build_online@<dataset>'s manifest, as dvc.yaml lays it out."""
    return Path("online") / f"{dataset}.json"


def open_live(params: Params, root: Path, dataset: str) -> LiveSource | None:
    """The live run of `dataset` when online.live.datasets names it and its manifest is on disk, else None."""
    path = root / live_manifest_path(dataset)
    if dataset not in params.online.live.datasets or not path.is_file():
        return None
    manifest = read_manifest(path)
    folders = [(WARMUP, manifest.warmup_ledger), *manifest.method_ledgers.items()]
    ledgers = [(name, LiveLedger(manifest.root(path, folder))) for name, folder in folders
               if (manifest.root(path, folder)).is_dir()]
    return LiveSource(manifest, ledgers, Window(manifest.token, manifest.top_k, manifest.group_size))


def live_sections(writer: SiteWriter, number: int, i: int, problem_id: str, source: LiveSource, *,
                  chunk: int = CHUNK) -> dict[str, Any]:
    """Write problem `i`'s live traces (every ledger's); returns what the problem page lists of them: per ledger its
    name, the chunks of trace indices and whether any keeps a top-k, and a row per trace."""
    ledgers, rows = [], []
    for m, (name, ledger) in enumerate(source.ledgers):
        traces = sorted(ledger.traces(problem_id).items())
        chunks = [traces[at:at + chunk] for at in range(0, len(traces), chunk)]
        has_top = any(trace.sample.top_logprobs is not None for _, trace in traces)
        for j, part in enumerate(chunks):
            writer.put(f"pool{number}/p{i}/l{m}_c{j}",
                       {"traces": [live_record(name, trace, source.confidence) for _, trace in part]})
            if has_top:
                writer.put(f"pool{number}/p{i}/l{m}_c{j}_top", top_chunk([top_record(t.sample) for _, t in part]))
        ledgers.append({"name": name, "chunks": [[index for index, _ in part] for part in chunks], "has_top": has_top})
        rows.extend(live_row(m, name, index, trace) for index, trace in traces)
    cfg = source.confidence
    return {"ledgers": ledgers, "traces": rows, "signal": cfg.token, "top_k": cfg.top_k,
            "group_size": cfg.group_size, "warmup": source.manifest.warmup, "budget": source.manifest.budget,
            "simulated": source.manifest.simulated}


def live_record(name: str, trace: LiveTrace, cfg: Window) -> dict[str, Any]:
    """A live trace's page data: trace_data's record, with where the run stopped it (none for a warmup trace)."""
    stopped = None if name == WARMUP else live_stop(f"online_{name}", trace.threshold, trace.sample.n_tokens,
                                                    trace.received, trace.stop_reason)
    return trace_record(trace.sample, cfg, {}, stopped)


def live_row(m: int, name: str, index: int, trace: LiveTrace) -> dict[str, Any]:
    """A live trace's row on its problem's page."""
    return {"ledger": m, "method": name, "index": index, "stop_reason": trace.stop_reason,
            "kept": trace.sample.n_tokens, "received": trace.received, "threshold": trace.threshold}
