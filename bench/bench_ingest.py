"""Ingestion throughput: chat-completions JSON (top-20) -> Sample, against json.loads and a plain loop.

Beside the parsers, the whole write path before the disk: parse, then codec.encode (C_i, text, the top-k
block as format 3 stores it), the payload a build appends.

Bodies come from the simulated model in DeepSeek's exact format; every method runs in the same process
on the same bodies, in interleaved rounds (median, min, max; wall and CPU). The fast path was built to
run at >= 10x the stdlib baseline (not guarded: no user waits on parsing alone).

Then one long reply (65,536 tokens with top-20, ~79 MB; 4,096 at --quick), the figure issue 46 names: parsed in
process by parse_completion against the orjson loop, and by a whole process that reads it from disk and parses it
(start-up and imports included, as a user waits for it) against one that only starts and reads it.
    python -m bench.run --only bench_ingest [--quick]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.figures import Figure
from bench.measure import Run, interleaved, run_process, timed
from tracevote.core.config_endpoints import SimConfig
from tracevote.sampling.ingest import _parse_slow, parse_completion
from tracevote.sim.model import SimModel
from tracevote.store import codec
from tracevote.store.logprobs import clean_logprobs

TOP_K = 20
SCALES = {"quick": (2, 1024, 1), "full": (8, 4096, 3)}  # responses, tokens each, rounds
LONG_REPLY = {"quick": 4096, "full": 65536}  # tokens of the long reply
NOTES = {"ingest_stdlib_json_loop": "json.loads + a plain loop (stdlib)", "ingest_fast": "parse_completion;",
         "ingest_fast_then_encode": "parse_completion + codec.encode (the payload a build appends);"}


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


def check_agreement(bodies: list[bytes]) -> None:
    for body in bodies:
        tokens, chosen, top = stdlib_loop(body)
        sample = fast(body)
        if sample.tokens != tokens or not np.array_equal(sample.top_logprobs, top, equal_nan=True) or \
                not np.array_equal(sample.token_logprobs, chosen, equal_nan=True):
            raise AssertionError("the fast path and the stdlib baseline disagree")


def sim_ms(tokens: int, index: int) -> float:
    """Milliseconds the simulated model takes to write one response."""
    model, request = sim_setup(tokens)
    model.complete_bytes(request, "warm-up")
    started = time.perf_counter()
    model.complete_bytes(request, f"timed/{index}")
    return 1000 * (time.perf_counter() - started)


def run(scale: str = "full") -> list[dict[str, Any]]:
    """Each parser's tokens/s over the same bodies, rounds interleaved, against the stdlib loop's."""
    n, tokens, rounds = SCALES[scale]
    bodies = sim_bodies(n, tokens)
    check_agreement(bodies)
    total = n * tokens
    methods: dict[str, Callable[[bytes], Any]] = {
        "ingest_stdlib_json_loop": stdlib_loop,
        "ingest_orjson_loop": lambda body: _parse_slow(body, TOP_K, False),
        "ingest_fast": fast,
        "ingest_fast_confidence_only": lambda body: fast(body, keep_top_logprobs=False),
        "ingest_fast_then_encode": lambda body: codec.encode(fast(body)),
    }
    sides = {name: (lambda method=method: timed(lambda: [method(body) for body in bodies]))
             for name, method in methods.items()}
    runs = interleaved(sides, rounds)
    figures = [ingest_figure(name, side_runs, runs["ingest_stdlib_json_loop"], total, f"{n} bodies x {tokens} "
                             f"tokens, top-{TOP_K}; {rounds} interleaved rounds") for name, side_runs in runs.items()]
    figures.append(Figure(f"ingestion: simulated model writing one {tokens}-token response", "ms",
                          [sim_ms(tokens, i) for i in range(rounds)], note="for scale"))
    figures += long_reply_figures(LONG_REPLY[scale], rounds)
    return [figure.to_json() for figure in figures]


ONE_REPLY = ("import sys\n"
             "body = open(sys.argv[1], 'rb').read()\n"
             "if sys.argv[2] == 'parse':\n"
             "    from tracevote.sampling.ingest import parse_completion\n"
             "    parse_completion(body, problem_id='p', sample_id=0, latency_s=0.0, keep_top_logprobs=True,\n"
             "                     expect_top_logprobs=20)\n")


def long_reply_figures(tokens: int, rounds: int) -> list[Figure]:
    """One long reply parsed in process (against the orjson loop), and by a whole process (against start-up)."""
    body = sim_bodies(1, tokens)[0]
    in_process = interleaved({"fast": lambda: timed(lambda: fast(body)),
                              "orjson": lambda: timed(lambda: _parse_slow(body, TOP_K, False))}, rounds)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reply.json"
        path.write_bytes(body)
        command = [sys.executable, "-c", ONE_REPLY, str(path)]
        whole = interleaved({side: (lambda side=side: run_process([*command, side], Path(folder)))
                             for side in ("parse", "start")}, rounds)
    note = f"one {tokens}-token reply, top-{TOP_K}, {len(body) / 1e6:.0f} MB; {rounds} interleaved rounds"
    return [Figure(f"ingestion: one {tokens}-token reply, parse_completion in process", "s",
                   [r.wall for r in in_process["fast"]], [r.wall for r in in_process["orjson"]],
                   higher_is_better=False, cpu=[r.cpu for r in in_process["fast"]],
                   baseline_cpu=[r.cpu for r in in_process["orjson"]], baseline_name="orjson + a loop (the slow path)",
                   note=note),
            Figure(f"ingestion: one {tokens}-token reply, a whole process reading and parsing it", "s",
                   [r.wall for r in whole["parse"]], [r.wall for r in whole["start"]], higher_is_better=False,
                   cpu=[r.cpu for r in whole["parse"]], baseline_cpu=[r.cpu for r in whole["start"]],
                   baseline_name="a process that only starts and reads it", note=f"{note}; imports included")]


def ingest_figure(name: str, runs: list[Run], baseline: list[Run], total: int, note: str) -> Figure:
    own = runs is baseline
    return Figure(f"ingestion: {name}", "tokens/s", [total / r.wall for r in runs],
                  None if own else [total / r.wall for r in baseline], cpu=[total / r.cpu for r in runs],
                  baseline_cpu=None if own else [total / r.cpu for r in baseline], cpu_unit="tokens/CPU-s",
                  baseline_name=NOTES["ingest_stdlib_json_loop"], note=f"{NOTES.get(name, '')} {note}".strip())
