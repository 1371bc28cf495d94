"""Client CPU per streamed token, before and after a change of the streaming client, side by side: the same 12
traces (top-20, ~4,000-token traces of the simulated model) read by stream_completion with its defaults from one
`sim-server`, by two worker processes, one importing tracevote from a git revision's `src/` (`--before`, default
the commit before the streaming client moved onto urllib3's reads and sseclient-py) and one from this tree, in
interleaved rounds (the order alternating), median [min-max] of each side. CPU is each worker's own
(time.process_time: its threads too), wall beside it; the server's is not counted.

    python -m bench.stream_cpu_before_after [--before REV] [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from bench.measure import Spread
from bench.split_stream_cpu import MESSAGES, REPO, TRACES, client, sim_server

BEFORE = "cfc8a17"  # the last commit with the hand-written streaming client (sampling.stream_fast)


def worker(url: str) -> None:
    """Reads "round" lines on stdin; for each, streams the TRACES traces and prints `wall cpu tokens`."""
    from tracevote.sampling.stream import stream_completion

    with client(url) as chat:
        stream_completion(chat, MESSAGES, sample_key="warm/0")  # warm-up, outside the rounds
        print("ready", flush=True)
        for _ in sys.stdin:
            started, cpu, tokens = time.monotonic(), time.process_time(), 0
            for i in range(TRACES):
                tokens += stream_completion(chat, MESSAGES, sample_key=f"p/{i}").n_tokens
            print(time.monotonic() - started, time.process_time() - cpu, tokens, flush=True)


def source_of(revision: str, folder: Path) -> Path:
    """`src/` of `revision`, unpacked into `folder`."""
    archive = subprocess.run(["git", "archive", revision, "src"], cwd=REPO, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def start_worker(url: str, src: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO}"}
    process = subprocess.Popen([sys.executable, "-m", "bench.stream_cpu_before_after", "--worker", url], cwd=REPO,
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def one_round(process: subprocess.Popen[str]) -> tuple[float, float, int]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("round\n")
    process.stdin.flush()
    wall, cpu, tokens = process.stdout.readline().split()
    return float(wall), float(cpu), int(tokens)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker")
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        url = stack.enter_context(sim_server(folder, None))
        sources = {"before": source_of(args.before, folder / "before"), "after": REPO / "src"}
        workers = {name: start_worker(url, src) for name, src in sources.items()}
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in workers}
        for n in range(args.rounds):
            for name in (list(workers) if n % 2 == 0 else list(reversed(workers))):
                runs[name].append(one_round(workers[name]))
        for process in workers.values():
            process.communicate("")
    for name, side_runs in runs.items():
        cpu = Spread.of([c / t * 1e6 for _, c, t in side_runs])
        wall = Spread.of([w / t * 1e6 for w, _, t in side_runs])
        print(f"{name} ({args.before if name == 'before' else 'this tree'}): {side_runs[0][2]} tokens a round, client "
              f"CPU {cpu.show('.1f')} us/token, wall {wall.show('.1f')} us/token, median of {cpu.count} rounds")


if __name__ == "__main__":
    main()
