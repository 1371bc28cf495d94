"""Benchmark: build_pool over several servers of one model, against the same build on one server.

The servers are the simulated model on loopback, in this process, each answering after a fixed latency
(the sim's `slow` fault on every request), as a GPU replica answers after its generation time. Each run is
`python stages/build_pool.py` as a subprocess, as DVC runs it (what the user waits for: start-up and the
probe included), into a fresh folder, at the same `pool.concurrency` per server:
- baseline: one server;
- four servers;
- four servers, one of which answers HTTP 500 to everything (set aside after three failures).
Figures are samples stored per second of the stage's wall time; ratios are against the baseline.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import yaml

from bench.synthetic_pool import ROOT, bench_params
from tracevote.core.config import SimConfig
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import SimServer, start_server, stop_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=300)
CONCURRENCY = 4  # per server


@dataclass(frozen=True)
class Scale:
    problems: int
    samples: int  # per problem
    latency_s: float  # per request, on every server


SCALES = {"full": Scale(16, 32, 0.2), "quick": Scale(4, 16, 0.05)}


@contextmanager
def servers(latency_s: float, healthy: int, failing: int = 0) -> Iterator[list[SimServer]]:
    """`healthy` servers answering after `latency_s`, then `failing` ones answering 500 to every request."""
    slow = parse_faults(f"slow=1.0,slow_s={latency_s},max_per_sample=1000000000")
    broken = parse_faults("500=1.0,max_per_sample=1000000000")
    with ExitStack() as stack:
        started = [start_server(SimModel(SIM), slow) for _ in range(healthy)]
        started += [start_server(SimModel(SIM), broken) for _ in range(failing)]
        for server in started:
            stack.callback(stop_server, server)
        yield started


def workdir(folder: Path, urls: list[str], size: Scale) -> Path:
    """params.yaml (the servers at `urls`) and data/bench.jsonl, as build_pool sees them in a DVC project."""
    folder.mkdir(parents=True)
    params = bench_params()
    params["model"]["backend"] = "openai"
    params["endpoints"]["deepseek"].update(base_url=urls, name="tracevote-sim", needs_key=False, extra_body={})
    params["decoding"].update(max_tokens=4 * SIM.mean_tokens, top_logprobs=20)
    params["pool"].update(n_pool=size.samples, concurrency=CONCURRENCY, max_cost_usd=1000.0)
    params["eval"]["k"] = [1, size.samples]
    params["report"]["k"] = size.samples
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    problems = folder / "data" / "bench.jsonl"
    problems.parent.mkdir()
    problems.write_bytes(b"".join(orjson.dumps({"id": f"bench-{p:02d}", "problem": f"Problem {p}.", "answer": 7})
                                  + b"\n" for p in range(size.problems)))
    return folder


def timed_build(folder: Path) -> float:
    """Wall seconds of the build_pool stage in `folder`."""
    command = [sys.executable, str(ROOT / "stages" / "build_pool.py"), "--dataset", "bench",
               "--problems", "data/bench.jsonl", "--pools", "pools/bench", "--manifest", "pools/bench.json"]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"build_pool in {folder} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return elapsed


def requests_to(server: SimServer) -> int:
    return sum(server.stats.snapshot()["by_sample"].values())


def run(scale: str = "full") -> list[dict]:
    size = SCALES[scale]
    total = size.problems * size.samples
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        with servers(size.latency_s, 1) as one:
            baseline = total / timed_build(workdir(root / "one", [s.base_url for s in one], size))
        rows.append({"name": "build_pool stage, 1 server (baseline)", "value": baseline, "unit": "samples/s",
                     "note": f"{total} samples, {size.latency_s} s per request, concurrency {CONCURRENCY}"})
        with servers(size.latency_s, 4) as four:
            rate = total / timed_build(workdir(root / "four", [s.base_url for s in four], size))
            spread = [requests_to(s) for s in four]
        rows.append({"name": "build_pool stage, 4 servers", "value": rate, "unit": "samples/s",
                     "ratio": rate / baseline, "note": f"requests per server {spread}; start-up included"})
        with servers(size.latency_s, 3, failing=1) as mixed:
            rate = total / timed_build(workdir(root / "mixed", [s.base_url for s in mixed], size))
            failed = requests_to(mixed[-1])
        rows.append({"name": "build_pool stage, 4 servers, one answering 500", "value": rate, "unit": "samples/s",
                     "ratio": rate / baseline, "note": f"{failed} requests to the failing server, then set aside"})
    return rows
