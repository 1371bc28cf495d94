"""Benchmark: build_pool over several servers of one model, against the same build on one server.

The servers are the simulated model on loopback, in this process, each answering after a fixed latency
(the sim's `slow` fault on every request), as a GPU replica answers after its generation time. Each run is
`python stages/build_pool.py` as a subprocess, as DVC runs it (what the user waits for: start-up and the
probe included), into a fresh folder, at the same `pool.concurrency` per server:
- baseline: one server;
- four servers;
- four servers, one of which answers HTTP 500 to everything (set aside after three failures).
Builds are interleaved (one, four, four with one failing, one, ...), each into a fresh folder. Figures are
samples stored per second of the stage's wall time (median, min, max), ratios against the baseline; CPU
seconds are the stage's plus this process's server threads'.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import yaml

from bench.figures import Figure
from bench.measure import Run, interleaved, run_process
from bench.synthetic_pool import ROOT, bench_params
from tracevote.core.config_endpoints import SimConfig
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
    rounds: int


SCALES = {"full": Scale(16, 16, 0.2, 3), "quick": Scale(2, 16, 0.05, 1)}


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


def timed_build(folder: Path) -> Run:
    """Wall and CPU seconds of the build_pool stage in `folder` (CPU includes this process's server threads)."""
    command = [sys.executable, str(ROOT / "stages" / "build_pool.py"), "--dataset", "bench",
               "--problems", "data/bench.jsonl", "--pools", "pools/bench", "--manifest", "pools/bench.json"]
    return run_process(command, folder)


def requests_to(server: SimServer) -> int:
    return sum(server.stats.snapshot()["by_sample"].values())


def run(scale: str = "full") -> list[dict]:
    size = SCALES[scale]
    total = size.problems * size.samples
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        root = Path(scratch)
        fleets = {"1 server": stack.enter_context(servers(size.latency_s, 1)),
                  "4 servers": stack.enter_context(servers(size.latency_s, 4)),
                  "4 servers, one answering 500": stack.enter_context(servers(size.latency_s, 3, failing=1))}
        folders = itertools.count()
        sides = {name: (lambda fleet=fleet: timed_build(workdir(root / str(next(folders)),
                                                                [s.base_url for s in fleet], size)))
                 for name, fleet in fleets.items()}
        runs = interleaved(sides, size.rounds)
        spread = [requests_to(s) // size.rounds for s in fleets["4 servers"]]
        failed = requests_to(fleets["4 servers, one answering 500"][-1]) // size.rounds
    base = runs["1 server"]
    notes = {"4 servers": f"requests per server per build {spread}",
             "4 servers, one answering 500": f"{failed} requests per build to the failing server, then set aside"}
    what = (f"{total} samples, {size.latency_s} s per request, concurrency {CONCURRENCY} per server, start-up "
            f"included; {size.rounds} interleaved rounds")
    return [Figure(f"build_pool stage, {name}", "samples/s", [total / r.wall for r in runs[name]],
                   [total / r.wall for r in base], cpu=[r.cpu for r in runs[name]], baseline_cpu=[r.cpu for r in base],
                   baseline_name="the same build on 1 server", note=f"{notes[name]}; {what}").to_json()
            for name in notes]
