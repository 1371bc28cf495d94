"""Benchmark: bytes per token of the stored pool, block by block, with and without top-k, against the raw API JSON.

Responses come from the simulated model in DeepSeek's exact wire format (top-20 logprobs with
`bytes` arrays, ~3000-token traces), are ingested like a real build ingests them, and are written
to a real pool log. The figure is the log's size on disk divided by the tokens it holds; beside it,
each block's share (the frame and payload header, C_i, text with chosen logprobs, top-k).

The simulator prints logprobs from a grid 0.4% apart; vLLM prints float32 values with every digit. So
the same responses are measured a second time with each logprob moved to a float32 value with all
its digits (a uniform step within the grid's half-width, the chosen token keeping its top-k entry):
"vLLM precision". Both are SIMULATED traces; no real model's logprobs are in the repository.
"""

from __future__ import annotations

import collections
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from bench.figures import Figure
from tracevote.core.config_endpoints import SimConfig
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.prompts import build_messages
from tracevote.sim.model import SimModel
from tracevote.store import codec
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.framing import HEADER, iter_payloads
from tracevote.store.interchange import for_storage

SCALES = {"full": (64, 3000, 3), "quick": (8, 600, 1)}  # (responses, mean tokens, rounds)
GRID_HALF_STEP = 1 / 512  # the sim's printed logprobs lie on a log grid 1/256 apart (sim/tokens.py)
FRAME = "frame and payload header"


def responses(count: int, mean_tokens: int) -> list[bytes]:
    model = SimModel(SimConfig(seed=3, signal=1.0, accuracy=0.45, mean_tokens=mean_tokens))
    messages = build_messages("Find the number of ordered pairs $(x,y)$ with $12x^2-xy-6y^2=0$.", system=None)
    request = {"model": "tracevote-sim", "messages": messages, "temperature": 0.6, "max_tokens": 4 * mean_tokens,
               "logprobs": True, "top_logprobs": 20}
    return [model.complete_bytes(request, f"bench/{i}") for i in range(count)]


def at_vllm_precision(body: bytes, seed: int) -> bytes:
    """The response with every logprob a float32 with all its digits, as vLLM prints them (sentinels kept)."""
    doc = orjson.loads(body)
    rng = np.random.default_rng([44, seed])
    for item in doc["choices"][0]["logprobs"]["content"]:
        for entry in item["top_logprobs"]:
            entry["logprob"] = _full_digits(entry["logprob"], rng)
        own = [entry["logprob"] for entry in item["top_logprobs"] if entry["token"] == item["token"]]
        item["logprob"] = own[0] if own else _full_digits(item["logprob"], rng)
    return orjson.dumps(doc)


def _full_digits(value: float, rng: np.random.Generator) -> float:
    if value <= -9999.0 or value == 0.0:
        return value
    return float(np.float32(value * np.exp(rng.uniform(-GRID_HALF_STEP, GRID_HALF_STEP))))


def block_bytes(payload: bytes | memoryview) -> dict[str, int]:
    """Stored bytes of each block of one frame; the frame header and the payload header count as FRAME."""
    header, offset = codec._header(memoryview(payload))
    sizes = {FRAME: HEADER.size + offset}
    for entry in header["blocks"]:
        sizes[entry[0]] = entry[1]
    return sizes


def stored_size(bodies: list[bytes], keep_top: bool, path: Path) -> tuple[dict[str, int], int, float, float]:
    """(bytes on disk by block, tokens, write seconds, read seconds) for one pool log holding `bodies`."""
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
    blocks: collections.Counter[str] = collections.Counter()
    for _, payload in iter_payloads(path):
        codec.decode(payload)
        blocks.update(block_bytes(payload))
    read = time.perf_counter() - start
    assert sum(blocks.values()) == path.stat().st_size, "every byte of the log belongs to one block"
    return dict(blocks), tokens, written, read


def size_figures(bodies: list[bytes], label: str, rounds: int, folder: Path) -> tuple[list[Figure], int]:
    """The pool's figures for `bodies`, with and without top-k, and the tokens they hold."""
    count = len(bodies)
    figures: list[Figure] = []
    for keep_top, kept in ((True, "with top-20"), (False, "confidence only")):
        measured = [stored_size(bodies, keep_top, folder / f"{label}-{keep_top}-{i}.tvf") for i in range(rounds)]
        blocks, tokens = measured[0][0], measured[0][1]
        note = f"{tokens} tokens in {count} sim responses"
        figures.append(Figure(f"pool: bytes per token, {kept}{label}", "B/token", [sum(blocks.values()) / tokens],
                              higher_is_better=False, note=note))
        figures += [Figure(f"pool: bytes per token, {kept}{label}: {block}", "B/token", [size / tokens],
                           higher_is_better=False) for block, size in blocks.items()]
        figures.append(Figure(f"pool: ingest + encode + append, {kept}{label}", "M tokens/s",
                              [tokens / m[2] / 1e6 for m in measured], note=f"API JSON bytes to a stored frame; "
                              f"{rounds} rounds"))
        figures.append(Figure(f"pool: read back, {kept}{label}", "M tokens/s", [tokens / m[3] / 1e6 for m in measured],
                              note="frame scan + decompress + decode, every field"))
    return figures, tokens


def run(scale: str = "full") -> list[dict[str, Any]]:
    count, mean_tokens, rounds = SCALES[scale]
    bodies = responses(count, mean_tokens)
    with tempfile.TemporaryDirectory() as folder:
        figures, tokens = size_figures(bodies, "", rounds, Path(folder))
        vllm = [at_vllm_precision(body, i) for i, body in enumerate(bodies)]
        figures += size_figures(vllm, ", vLLM precision", rounds, Path(folder))[0]
    figures.append(Figure("raw API JSON, top-20 (for scale)", "B/token", [sum(map(len, bodies)) / tokens]))
    return [figure.to_json() for figure in figures]
