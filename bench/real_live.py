"""The live run of `make real` beside the engine's own count and the pool of the same model and seeds.

    python bench/real_live.py --real real --engine-log real-engine.log

Reads the scratch project `make real` left (its live ledgers, its pool, score_online's headline metrics) and the
engine log of a server started with tracevote.engine.counting (as `make real` starts it). Per trace of the live
run: the tokens the client received and kept, the tokens the engine sampled for that request, and whether the
kept tokens are the pool's trace of the same key (same seed) up to where the live trace stopped. Prints one table
row per part of the run (warmup, each method), every trace whose tokens differ from the pool's, and the totals.

The engine log names each streamed request by its key ("<problem>/<index>"). The warmup streams a key once; each
method streams the keys warmup..budget-1 once, the methods one after another per problem in the order of
online.live.methods (sampling.live_schedule.next_job), so a key's n-th streamed request is the n-th method's.
"""

from __future__ import annotations

import argparse
import collections
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import yaml

from tracevote.engine.llamacpp import read_counts
from tracevote.store.live import LiveLedger, LiveTrace
from tracevote.store.live import read_manifest as read_live_manifest
from tracevote.store.pool import Pool
from tracevote.store.pool import read_manifest as read_pool_manifest
from tracevote.store.records import Sample

DATASET = "tinymath"


@dataclass
class Part:
    """One part of the live run (the warmup or a method): its traces' counts."""

    traces: int = 0
    by_reason: collections.Counter[str] = field(default_factory=collections.Counter)
    received: int = 0
    kept: int = 0
    billed: int = 0
    sampled: int = 0  # the engine's own count
    unmatched: int = 0  # traces without an engine count
    pool_tokens: int = 0  # the pool's same traces, in full
    differ: list[str] = field(default_factory=list)  # traces whose kept tokens are not the pool's prefix
    confidence_differ: list[str] = field(default_factory=list)  # same tokens, a C_i differing by more than 1e-4
    ahead: list[int] = field(default_factory=list)  # per trace: engine-sampled minus received

    def add(self, trace: LiveTrace, sampled: int | None, pooled: Sample | None, key: str) -> None:
        self.traces += 1
        self.by_reason[trace.stop_reason] += 1
        self.received += trace.received
        self.kept += trace.sample.n_tokens
        self.billed += trace.completion_tokens
        if sampled is None:
            self.unmatched += 1
        else:
            self.sampled += sampled
            self.ahead.append(sampled - trace.received)
        kept = trace.sample.n_tokens
        if pooled is None or list(trace.sample.tokens) != list(pooled.tokens[:kept]):
            self.differ.append(key)
        elif not np.allclose(trace.sample.token_confidence, pooled.token_confidence[:kept], atol=1e-4,
                             equal_nan=True):
            self.confidence_differ.append(key)
        self.pool_tokens += 0 if pooled is None else pooled.n_tokens


def engine_counts(log: Path) -> dict[str, list[int]]:
    """Each streamed key's engine counts (tokens sampled), in the order its requests ended."""
    counts: dict[str, list[int]] = collections.defaultdict(list)
    for line in read_counts(log):
        if line["stream"] and line["key"] is not None:
            counts[line["key"]].append(int(line["sampled"]))
    return counts


def pool_samples(real: Path) -> dict[str, dict[int, Sample]]:
    manifest_path = real / "pools" / f"{DATASET}.json"
    manifest = read_pool_manifest(manifest_path)
    pool = Pool(manifest.pool_root(manifest_path))
    return {problem: {sample.sample_id: sample for sample in pool.iter_samples(problem)}
            for problem in pool.problem_ids()}


def compare(real: Path, log: Path) -> dict[str, Part]:
    manifest_path = real / "online" / f"{DATASET}.json"
    manifest = read_live_manifest(manifest_path)
    pool = pool_samples(real)
    counts = engine_counts(log)
    seen: collections.Counter[str] = collections.Counter()
    # the order the run streams a key's requests in: the warmup, then online.live.methods in order
    methods = yaml.safe_load((real / "params.yaml").read_text(encoding="utf-8"))["online"]["live"]["methods"]
    ledgers = {"warmup": manifest.warmup_ledger, **{name: manifest.method_ledgers[name] for name in methods}}
    parts = {name: Part() for name in ledgers}
    for problem in manifest.problems:
        for name, relative in ledgers.items():
            ledger = LiveLedger(manifest.root(manifest_path, relative))
            for index, trace in sorted(ledger.traces(problem).items()):
                key = f"{problem}/{index}"
                order = seen[key]
                seen[key] += 1
                sampled = counts[key][order] if order < len(counts.get(key, [])) else None
                parts[name].add(trace, sampled, pool.get(problem, {}).get(index), key)
    return parts


def render(parts: dict[str, Part]) -> str:
    lines = ["| part | traces | ended | tokens received | kept | billed (client) | engine sampled | engine - "
             "received per trace (min/median/max) | the pool's same traces, whole | traces not the pool's prefix | "
             "same tokens, other C_i |",
             "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for name, part in parts.items():
        ended = ", ".join(f"{count} {reason}" for reason, count in sorted(part.by_reason.items()))
        ahead = sorted(part.ahead)
        spread = f"{ahead[0]} / {ahead[len(ahead) // 2]} / {ahead[-1]}" if ahead else "-"
        lines.append(f"| {name} | {part.traces} | {ended} | {part.received:,} | {part.kept:,} | {part.billed:,} | "
                     f"{part.sampled:,}{f' ({part.unmatched} unmatched)' if part.unmatched else ''} | {spread} | "
                     f"{part.pool_tokens:,} | {len(part.differ)} | {len(part.confidence_differ)} |")
    for name, part in parts.items():
        if part.differ:
            lines.append(f"{name}: kept tokens differ from the pool's trace: {', '.join(part.differ[:20])}")
        if part.confidence_differ:
            lines.append(f"{name}: same tokens, other confidences: {', '.join(part.confidence_differ[:10])}")
    return "\n".join(lines)


def headline(real: Path) -> str:
    folder = real / "metrics" / "headline" / "online_live" / DATASET
    return "\n".join(f"{path.name}: {orjson.loads(path.read_bytes())}" for path in sorted(folder.glob("*.json")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=Path, default=Path("real"), help="make real's scratch project")
    parser.add_argument("--engine-log", type=Path, default=Path("real-engine.log"),
                        help="the log of the server make real started")
    args = parser.parse_args()
    print(render(compare(args.real, args.engine_log)))
    print(headline(args.real))


if __name__ == "__main__":
    main()
