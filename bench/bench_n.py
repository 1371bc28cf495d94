"""Benchmark: build_pool with `n` samples in one request (pool.samples_per_request) against one request per sample.

Three measures, each side against its baseline in interleaved rounds (median, min, max; CPU beside wall):
- the simulator, paced: each request answers after a fixed latency whatever its n (the sim's `slow` fault on every
  request), as a GPU server decoding the n sequences of a request in one batch, well below its batch capacity,
  answers after about one sequence's time. `python stages/build_pool.py` as a subprocess, as DVC runs it (start-up
  and the probes included), into a fresh folder, profile local (vLLM's rules: n honoured). The figure is what n
  saves in requests and client work, not a GPU's throughput, which the simulator does not model.
- ingest: parsing a reply into samples, per trace: n-choice replies in the compact layout (vLLM's, SGLang's: cut
  into one-choice documents, each on the typed fast path) and in a spaced layout (OpenAI's: a full orjson parse
  read choice by choice), against one-choice replies on the fast path (sampling.choices, sampling.ingest_fast).
- the real llama.cpp engine (models/tinymath.gguf, llama-cpp-python's server, full scale only): llama.cpp ignores
  n, so the probe finds it and the build sends one trace per request; the figure shows what the setting costs there
  (the n probe), against the same build with samples_per_request 1. Skipped, with the reason, without the engine.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import yaml

from bench.figures import Figure
from bench.measure import Run, interleaved, run_process
from bench.synthetic_pool import ROOT, bench_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.engine.llamacpp import llamacpp_server, missing_engine_reason
from tracevote.sampling.choices import parse_choices
from tracevote.sampling.ingest import parse_completion
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.nchoices import complete_n
from tracevote.sim.server import ServerOptions, start_server, stop_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=300)
CONCURRENCY = 4
PER_REQUEST = 4
MODEL = ROOT / "models" / "tinymath.gguf"


@dataclass(frozen=True)
class Scale:
    problems: int
    samples: int  # per problem
    latency_s: float  # per request
    rounds: int
    replies: int  # n-choice replies parsed per ingest round
    engine: bool


SCALES = {"full": Scale(8, 16, 0.2, 3, 40, True), "quick": Scale(2, 8, 0.05, 1, 2, False)}


def workdir(folder: Path, base_url: str, size: Scale, per_request: int, *, max_tokens: int,
            name: str = "tracevote-sim") -> Path:
    """params.yaml (the server at `base_url`, profile local) and data/bench.jsonl, as build_pool sees them."""
    folder.mkdir(parents=True)
    params = bench_params()
    params["model"]["backend"] = "openai"
    params["endpoints"]["deepseek"].update(base_url=base_url, name=name, needs_key=False, extra_body={},
                                           profile="local")
    params["decoding"].update(max_tokens=max_tokens, top_logprobs=20, seed=0)
    params["pool"].update(n_pool=size.samples, concurrency=CONCURRENCY, max_cost_usd=1000.0,
                          samples_per_request=per_request)
    params["eval"]["k"] = [1, size.samples]
    params["report"]["k"] = size.samples
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    problems = folder / "data" / "bench.jsonl"
    problems.parent.mkdir()
    problems.write_bytes(b"".join(orjson.dumps({"id": f"bench-{p:02d}", "problem": f"What is {p} + 7?",
                                                "answer": p + 7}) + b"\n" for p in range(size.problems)))
    return folder


def timed_build(folder: Path) -> Run:
    command = [sys.executable, str(ROOT / "stages" / "build_pool.py"), "--dataset", "bench",
               "--problems", "data/bench.jsonl", "--pools", "pools/bench", "--manifest", "pools/bench.json"]
    return run_process(command, folder)


def build_sides(root: Path, base_url: str, size: Scale, max_tokens: int, name: str = "tracevote-sim") -> dict:
    folders = itertools.count()
    return {f"samples_per_request {per}": (lambda per=per: timed_build(
        workdir(root / str(next(folders)), base_url, size, per, max_tokens=max_tokens, name=name)))
        for per in (PER_REQUEST, 1)}


def build_figure(runs: dict[str, list[Run]], total: int, what: str) -> dict:
    ours, base = runs[f"samples_per_request {PER_REQUEST}"], runs["samples_per_request 1"]
    return Figure(f"build_pool stage, samples_per_request {PER_REQUEST}, {what}", "samples/s",
                  [total / r.wall for r in ours], [total / r.wall for r in base], cpu=[r.cpu for r in ours],
                  baseline_cpu=[r.cpu for r in base], baseline_name="the same build, one sample a request",
                  note=f"{total} samples, concurrency {CONCURRENCY}, start-up and probes included").to_json()


def simulator_figure(size: Scale) -> dict:
    slow = parse_faults(f"slow=1.0,slow_s={size.latency_s},max_per_sample=1000000000")
    server = start_server(SimModel(SIM), slow, ServerOptions(profile="local"))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            runs = interleaved(build_sides(Path(scratch), server.base_url, size, 4 * SIM.mean_tokens), size.rounds)
    finally:
        stop_server(server)
    return build_figure(runs, size.problems * size.samples,
                        f"simulator, {size.latency_s} s a request whatever n, {size.rounds} interleaved rounds")


def ingest_figures(size: Scale) -> list[dict]:
    """Microseconds per trace: n-choice replies (compact: cut, fast path; spaced: orjson per choice) against
    one-choice replies (fast path)."""
    model, profile = SimModel(SIM), PROFILES["local"]
    request = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 9?"}], "logprobs": True,
               "top_logprobs": 20, "max_tokens": 4 * SIM.mean_tokens, "temperature": 0.6}
    shared = [complete_n(model, request, f"p/{PER_REQUEST * i}", PER_REQUEST, degrade="none", kind="solve",
                         profile=profile) for i in range(size.replies)]
    alone = [model.complete_bytes(request, f"p/{s}", profile=profile) for s in range(PER_REQUEST * size.replies)]
    spaced = [json.dumps(orjson.loads(body), indent=1).encode() for body in shared]
    traces = PER_REQUEST * size.replies

    def parse_shared(bodies: list[bytes]) -> Run:
        started, cpu = time.perf_counter(), time.process_time()
        for i, body in enumerate(bodies):
            parse_choices(body, problem_id="p", sample_ids=list(range(PER_REQUEST * i, PER_REQUEST * (i + 1))),
                          latency_s=0.0, keep_top_logprobs=True, expect_top_logprobs=20)
        return Run(time.perf_counter() - started, time.process_time() - cpu)

    def parse_alone() -> Run:
        started, cpu = time.perf_counter(), time.process_time()
        for s, body in enumerate(alone):
            parse_completion(body, problem_id="p", sample_id=s, latency_s=0.0, keep_top_logprobs=True,
                             expect_top_logprobs=20)
        return Run(time.perf_counter() - started, time.process_time() - cpu)

    parse_alone()  # untimed: the first parse builds the typed decoders
    sides = {"compact layout (cut, fast path)": lambda: parse_shared(shared),
             "spaced layout (orjson per choice)": lambda: parse_shared(spaced), "alone": parse_alone}
    runs = interleaved(sides, size.rounds)
    return [Figure(f"ingest, {PER_REQUEST} choices a reply, {name}", "us/trace",
                   [1e6 * r.wall / traces for r in runs[name]], [1e6 * r.wall / traces for r in runs["alone"]],
                   higher_is_better=False, baseline_name="one-choice replies, typed fast path",
                   cpu=[r.cpu for r in runs[name]], baseline_cpu=[r.cpu for r in runs["alone"]],
                   note=f"{traces} traces of ~{SIM.mean_tokens} tokens, top-20").to_json()
            for name in sides if name != "alone"]


def engine_figure(size: Scale) -> dict:
    reason = None if size.engine else "the real engine runs at full scale only"
    reason = reason or missing_engine_reason() or (None if MODEL.is_file() else f"{MODEL} is absent")
    if reason:
        return {"skipped": f"llama.cpp: {reason}"}
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        engine = stack.enter_context(llamacpp_server(MODEL, log=Path(scratch) / "engine.log"))
        runs = interleaved(build_sides(Path(scratch) / "builds", engine.base_url, size, 48, name=engine.model_alias),
                           size.rounds)
    return build_figure(runs, size.problems * size.samples,
                        f"real llama.cpp (ignores n: one trace a request), {size.rounds} interleaved rounds")


def run(scale: str = "full") -> list[dict]:
    size = SCALES[scale]
    return [simulator_figure(size), *ingest_figures(size), engine_figure(size)]
