"""Benchmark: bytes per token of the stored pool, with and without top-k, against the raw API JSON.

Responses come from the simulated model in DeepSeek's exact wire format (top-20 logprobs with
`bytes` arrays, ~3000-token traces), are ingested like a real build ingests them, and are written
to a real pool log. The figure is the log's size on disk divided by the tokens it holds.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from bench.figures import Figure
from tracevote.core.config_endpoints import SimConfig
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.prompts import build_messages
from tracevote.sim.model import SimModel
from tracevote.store import codec
from tracevote.store.framing import FrameWriter, iter_payloads
from tracevote.store.interchange import for_storage

SCALES = {"full": (64, 3000, 3), "quick": (8, 600, 1)}  # (responses, mean tokens, rounds)


def responses(count: int, mean_tokens: int) -> list[bytes]:
    model = SimModel(SimConfig(seed=3, signal=1.0, accuracy=0.45, mean_tokens=mean_tokens))
    messages = build_messages("Find the number of ordered pairs $(x,y)$ with $12x^2-xy-6y^2=0$.", system=None)
    request = {"model": "tracevote-sim", "messages": messages, "temperature": 0.6, "max_tokens": 4 * mean_tokens,
               "logprobs": True, "top_logprobs": 20}
    return [model.complete_bytes(request, f"bench/{i}") for i in range(count)]


def stored_size(bodies: list[bytes], keep_top: bool, folder: Path) -> tuple[int, int, float, float]:
    """(bytes on disk, tokens, write seconds, read seconds) for one pool log holding `bodies`."""
    path = folder / f"log-{keep_top}.tvf"
    tokens = 0
    start = time.perf_counter()
    with FrameWriter(path) as writer:
        for i, body in enumerate(bodies):
            sample = parse_completion(body, problem_id="bench", sample_id=i, latency_s=0.0,
                                      keep_top_logprobs=True, expect_top_logprobs=20)
            sample = for_storage(dataclasses.replace(sample, top_tokens=None), keep_top)
            writer.append(i, codec.encode(sample))
            tokens += sample.n_tokens
    written = time.perf_counter() - start
    start = time.perf_counter()
    for _, payload in iter_payloads(path):
        codec.decode(payload)
    return path.stat().st_size, tokens, written, time.perf_counter() - start


def run(scale: str = "full") -> list[dict]:
    count, mean_tokens, rounds = SCALES[scale]
    bodies = responses(count, mean_tokens)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as folder:
        for keep_top, label in ((True, "with top-20"), (False, "confidence only")):
            measured = [stored_size(bodies, keep_top, Path(folder) / str(i)) for i in range(rounds)]  # fresh logs
            size, tokens = measured[0][0], measured[0][1]
            figures.append(Figure(f"pool: bytes per token, {label}", "B/token", [size / tokens],
                                  note=f"{tokens} tokens in {count} sim responses"))
            figures.append(Figure(f"pool: ingest + encode + append, {label}", "M tokens/s",
                                  [tokens / m[2] / 1e6 for m in measured], note=f"API JSON bytes to a stored frame; "
                                  f"{rounds} rounds"))
            figures.append(Figure(f"pool: read back, {label}", "M tokens/s", [tokens / m[3] / 1e6 for m in measured],
                                  note="frame scan + decompress + decode, every field"))
    raw = sum(len(body) for body in bodies) / tokens
    figures.append(Figure("raw API JSON, top-20 (for scale)", "B/token", [raw]))
    return [figure.to_json() for figure in figures]
