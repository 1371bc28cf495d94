"""Chunks per second sim-server streams over loopback to one requests client reading every line: five
4,000-token replies (top_logprobs as the first argument, 20 by default), then the same replies unstreamed.

    .venv/bin/python bench/sim_stream_rate.py 20
"""

from __future__ import annotations

import sys
import time

import requests

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.simulated import SAMPLE_HEADER
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

REPLIES = 5


def main(top_logprobs: int) -> None:
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=4000))
    request = {"model": "m", "messages": [{"role": "user", "content": "Find x."}], "max_tokens": 4096}
    if top_logprobs:
        request |= {"logprobs": True, "top_logprobs": top_logprobs}
    with running_server(model) as url:
        chunks, wall, cpu = 0, time.perf_counter(), time.process_time()
        for i in range(REPLIES):
            reply = requests.post(f"{url}/chat/completions", json=request | {"stream": True},
                                  headers={SAMPLE_HEADER: f"b{i}"}, stream=True, timeout=600)
            chunks += sum(1 for line in reply.iter_lines() if line.startswith(b"data: "))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        whole = time.perf_counter()
        for i in range(REPLIES):
            requests.post(f"{url}/chat/completions", json=request, headers={SAMPLE_HEADER: f"b{i}"}, timeout=600)
        whole = time.perf_counter() - whole
    print(f"top_logprobs {top_logprobs}: {chunks} chunks in {wall:.2f} s = {chunks / wall:.0f} chunks/s "
          f"(server and client CPU {1e6 * cpu / chunks:.0f} us/chunk); the same replies unstreamed: {whole:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
