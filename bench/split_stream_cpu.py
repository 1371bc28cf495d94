"""Client CPU per token of streamed traces with a reasoning parser's split and without it, side by side: the same 12
traces (top-20, the simulated model of tests/fixtures/params.yaml with ~4,000-token traces) read by
stream_completion from two `sim-server` processes, one run with `--reasoning-parser reasoning` and one without, in
interleaved rounds (median [min-max] of each side). CPU is this process's alone (time.process_time), so the
servers' is not counted.

    python -m bench.split_stream_cpu
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from bench.measure import Run, Spread, interleaved
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.sampling.client import ChatClient
from tracevote.sampling.stream import stream_completion

REPO = Path(__file__).resolve().parents[1]
TRACES, ROUNDS = 12, 5
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=4000)
MESSAGES = [{"role": "user", "content": "Find x.\n\nPlease reason step by step, and put your final answer within "
                                        "\\boxed{}."}]


@contextlib.contextmanager
def sim_server(folder: Path, parser: str | None) -> Iterator[str]:
    """`python -m tracevote sim-server` (with `parser` as its reasoning parser) on a free port, for the block."""
    params = yaml.safe_load((REPO / "tests" / "fixtures" / "params.yaml").read_text(encoding="utf-8"))
    params["model"]["sim"] = dataclasses.asdict(SIM)
    (folder / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    split = ["--reasoning-parser", parser] if parser else []
    server = subprocess.Popen([sys.executable, "-m", "tracevote", "sim-server", "--params", "params.yaml",
                               "--port", str(port), *split], cwd=folder, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        next(line for line in server.stdout if "listening on" in line)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait()


def side(client: ChatClient) -> Run:
    """One round: the TRACES traces streamed; its `cpu` is client CPU seconds, its output the tokens read."""
    started, cpu, tokens = time.monotonic(), time.process_time(), 0
    for i in range(TRACES):
        tokens += stream_completion(client, MESSAGES, sample_key=f"p/{i}").n_tokens
    return Run(time.monotonic() - started, time.process_time() - cpu, str(tokens))


def client(url: str) -> ChatClient:
    model = ModelConfig(backend="openai", base_url=url, name="deepseek-v4-flash", extra_body={},
                        api_key_env="NO_KEY", needs_key=False, sim=SIM)
    decoding = DecodingConfig(temperature=0.6, top_p=None, max_tokens=8192, top_logprobs=20)
    return ChatClient(model, decoding, api_key=None, timeout_s=60, max_retries=0)


def main() -> None:
    with contextlib.ExitStack() as stack:
        clients = {}
        for parser in ("none", "reasoning"):
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            url = stack.enter_context(sim_server(folder, None if parser == "none" else parser))
            clients[parser] = stack.enter_context(client(url))
            stream_completion(clients[parser], MESSAGES, sample_key="warm/0")  # warm-up, outside the rounds
        runs = interleaved({parser: lambda c=c: side(c) for parser, c in clients.items()}, ROUNDS)
    per_token = {parser: Spread.of([run.cpu / int(run.output) * 1e6 for run in side_runs])
                 for parser, side_runs in runs.items()}
    for parser, spread in per_token.items():
        print(f"reasoning parser {parser}: {runs[parser][0].output} tokens a round, client CPU "
              f"{spread.show('.2f')} us/token, median of {spread.count} rounds")
    print(f"split / plain: {per_token['reasoning'].median / per_token['none'].median:.2f}x (medians)")


if __name__ == "__main__":
    main()
