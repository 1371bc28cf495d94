"""Client CPU per token of streamed traces with a reasoning parser's split and without it: the same 12 traces
(top-20; the simulated model of the params.yaml in the working directory) read by stream_completion from a
`sim-server` process run with and without `--reasoning-parser reasoning`. CPU is this process's alone
(time.process_time), so the server's is not counted.

    .venv/bin/python bench/split_stream_cpu.py
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.sampling.client import ChatClient
from tracevote.sampling.stream import stream_completion

TRACES = 12
MESSAGES = [{"role": "user", "content": "Find x.\n\nPlease reason step by step, and put your final answer within "
                                        "\\boxed{}."}]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(parser: str | None) -> tuple[int, float]:
    """(tokens, client CPU seconds) of TRACES streamed traces from a sim-server with `parser`."""
    port = free_port()
    split = ["--reasoning-parser", parser] if parser else []
    server = subprocess.Popen([sys.executable, "-m", "tracevote", "sim-server", "--port", str(port), *split],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        next(line for line in server.stdout if "listening on" in line)
        model = ModelConfig(backend="openai", base_url=f"http://127.0.0.1:{port}", name="deepseek-v4-flash",
                            extra_body={}, api_key_env="NO_KEY", needs_key=False,
                            sim=SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=4000))
        decoding = DecodingConfig(temperature=0.6, top_p=None, max_tokens=8192, top_logprobs=20)
        with ChatClient(model, decoding, api_key=None, timeout_s=60, max_retries=0) as client:
            stream_completion(client, MESSAGES, sample_key="warm/0")  # numba's kernels load once
            cpu, tokens = time.process_time(), 0
            for i in range(TRACES):
                tokens += stream_completion(client, MESSAGES, sample_key=f"p/{i}").n_tokens
            return tokens, time.process_time() - cpu
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    for parser in (None, "reasoning"):
        tokens, cpu = measure(parser)
        print(f"reasoning parser {parser or 'none'}: {tokens} tokens, client CPU {cpu:.2f} s, "
              f"{cpu / tokens * 1e6:.1f} us/token")


if __name__ == "__main__":
    main()
