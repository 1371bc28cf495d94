"""Ingestion throughput: chat-completions JSON (top-20) -> Sample, against json.loads and a plain loop.

Bodies come from the simulated model in DeepSeek's exact format; every method runs in the same process
on the same bodies, best of a few rounds. Goal: the fast path at >= 10x the stdlib baseline.
    python -m bench.run --only bench_ingest [--quick]
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tracevote.core.config import SimConfig
from tracevote.sampling.ingest import _parse_slow, parse_completion
from tracevote.sim.model import SimModel
from tracevote.store.logprobs import clean_logprobs

TOP_K = 20
SCALES = {"quick": (2, 1024, 2), "full": (8, 4096, 3)}  # responses, tokens each, rounds
NOTES = {"ingest_stdlib_json_loop": "baseline: json.loads + a plain loop",
         "ingest_fast": "parse_completion; goal >= 10x the baseline at full scale"}


def sim_setup(tokens: int) -> tuple[SimModel, dict[str, Any]]:
    """The model and a request whose responses run exactly `tokens` tokens (traces are cut there)."""
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=4 * tokens))
    prompt = "Find x.\n\nPlease reason step by step, and put your final answer within \\boxed{}."
    request = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": prompt}],
               "temperature": 0.6, "max_tokens": tokens, "logprobs": True, "top_logprobs": TOP_K}
    return model, request


def sim_bodies(n: int, tokens: int) -> list[bytes]:
    model, request = sim_setup(tokens)
    return [model.complete_bytes(request, f"bench/{i}") for i in range(n)]


def stdlib_loop(body: bytes) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The baseline: json.loads, then a plain loop building the arrays a Sample holds."""
    doc = json.loads(body)
    tokens, chosen, top = [], [], []
    for item in doc["choices"][0]["logprobs"]["content"]:
        tokens.append(item["token"])
        chosen.append(item["logprob"])
        row = [entry["logprob"] for entry in item["top_logprobs"]]
        top.append(row + [float("nan")] * (TOP_K - len(row)))
    return tokens, clean_logprobs(np.array(chosen)), clean_logprobs(np.array(top))


def fast(body: bytes, keep_top_logprobs: bool = True) -> Any:
    return parse_completion(body, problem_id="bench", sample_id=0, latency_s=0.0,
                            keep_top_logprobs=keep_top_logprobs, expect_top_logprobs=TOP_K)


def best_seconds(method: Callable[[bytes], Any], bodies: list[bytes], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for body in bodies:
            method(body)
        best = min(best, time.perf_counter() - started)
    return best


def check_agreement(bodies: list[bytes]) -> None:
    for body in bodies:
        tokens, chosen, top = stdlib_loop(body)
        sample = fast(body)
        if sample.tokens != tokens or not np.array_equal(sample.top_logprobs, top, equal_nan=True) or \
                not np.array_equal(sample.token_logprobs, chosen, equal_nan=True):
            raise AssertionError("the fast path and the stdlib baseline disagree")


def sim_ms(tokens: int, rounds: int) -> float:
    """Milliseconds the simulated model takes to write one response, best of a few."""
    model, request = sim_setup(tokens)
    model.complete_bytes(request, "warm-up")
    best = float("inf")
    for i in range(rounds + 2):
        started = time.perf_counter()
        model.complete_bytes(request, f"timed/{i}")
        best = min(best, time.perf_counter() - started)
    return 1000 * best


def run(scale: str = "full") -> list[dict[str, Any]]:
    """Rows of {name, value, unit, ratio}; ratio is against the stdlib baseline's throughput."""
    n, tokens, rounds = SCALES[scale]
    bodies = sim_bodies(n, tokens)
    check_agreement(bodies)
    total = n * tokens
    methods: dict[str, Callable[[bytes], Any]] = {
        "ingest_stdlib_json_loop": stdlib_loop,
        "ingest_orjson_loop": lambda body: _parse_slow(body, TOP_K, False),
        "ingest_fast": fast,
        "ingest_fast_confidence_only": lambda body: fast(body, keep_top_logprobs=False),
    }
    rates = {name: total / best_seconds(method, bodies, rounds) for name, method in methods.items()}
    baseline = rates["ingest_stdlib_json_loop"]
    rows = [{"name": f"{name}_tokens_per_s", "value": round(rate), "unit": "tokens/s",
             "ratio": round(rate / baseline, 2), "note": NOTES.get(name, "")} for name, rate in rates.items()]
    rows.append({"name": f"sim_response_ms_{tokens}x{TOP_K}", "value": round(sim_ms(tokens, rounds), 2),
                 "unit": "ms", "ratio": None})
    return rows


def main(argv: list[str]) -> None:
    scale = argv[0] if argv else "full"
    for row in run(scale):
        ratio = "" if row["ratio"] is None else f"  ({row['ratio']}x stdlib)"
        print(f"{row['name']:<44} {row['value']:>12} {row['unit']}{ratio}")

