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

from tracevote.core.config import SimConfig
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.prompts import build_messages
from tracevote.sim.model import SimModel
from tracevote.store import codec
from tracevote.store.framing import FrameWriter, iter_payloads
from tracevote.store.interchange import for_storage

GOAL_WITH_TOP = 48.0
GOAL_WITHOUT_TOP = 12.0
SCALES = {"full": (64, 3000), "quick": (8, 600)}  # (responses, mean tokens)


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
    count, mean_tokens = SCALES[scale]
    bodies = responses(count, mean_tokens)
    raw_tokens = 0
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        for keep_top, goal in ((True, GOAL_WITH_TOP), (False, GOAL_WITHOUT_TOP)):
            size, tokens, write_s, read_s = stored_size(bodies, keep_top, Path(folder))
            raw_tokens = tokens
            label = "with top-20" if keep_top else "confidence only"
            rows.append({"name": f"pool: bytes per token, {label}", "value": size / tokens, "unit": "B/token",
                         "ratio": (size / tokens) / goal, "note": f"ratio is to the {goal:.0f} B goal; "
                         f"{tokens} tokens in {count} sim responses"})
            rows.append({"name": f"pool: ingest + encode + append, {label}", "value": tokens / write_s / 1e6,
                         "unit": "M tokens/s", "note": "API JSON bytes to a stored frame"})
            rows.append({"name": f"pool: read back, {label}", "value": tokens / read_s / 1e6, "unit": "M tokens/s",
                         "note": "frame scan + decompress + decode"})
    raw = sum(len(body) for body in bodies) / raw_tokens
    rows.append({"name": "raw API JSON, top-20 (for scale)", "value": raw, "unit": "B/token",
                 "ratio": raw / rows[0]["value"], "note": "ratio: raw size / stored size with top-20"})
    return rows

