"""Record streamed replies of llama.cpp's server running the tinymath model, byte for byte, as test fixtures.

    .venv/bin/python train/record_engine_streams.py --base-url http://127.0.0.1:8947/v1 \\
        --heldout src/tracevote/datasets/data/tinymath_heldout.jsonl --out tests/fixtures/llamacpp

Each fixture is {"engine", "request", "status", "content_type", "sse"}: "sse" is the body exactly as it arrived
(its server-sent events, keep-alive lines and all), which tests/sampling/test_stream.py serves again over a
loopback server. The requests are the ones tracevote's streamed client sends (sampling.stream.stream_body).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import requests
from record_engine_replies import ENGINE, base_request, record_all


def variants(problems: list[str]) -> dict[str, dict[str, Any]]:
    """The streamed requests recorded, by fixture name."""
    streamed = {"stream": True, "stream_options": {"include_usage": True}}
    return {
        "stream_top20_usage": {**base_request(problems[0]), **streamed},
        "stream_top20_second": {**base_request(problems[1]), **streamed, "seed": 11},
        "stream_top3_length": {**base_request(problems[2]), **streamed, "top_logprobs": 3, "max_tokens": 12},
    }


def record(session: requests.Session, base_url: str, request: dict[str, Any]) -> dict[str, Any]:
    response = session.post(f"{base_url}/chat/completions", json=request, timeout=600, stream=True)
    body = b"".join(response.iter_content(chunk_size=None))
    return {"engine": ENGINE, "request": request, "status": response.status_code,
            "content_type": response.headers.get("content-type", ""), "sse": body.decode("utf-8")}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--heldout", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    problems = [json.loads(line)["problem"] for line in args.heldout.read_text().splitlines()[:3]]
    record_all(variants(problems), args.base_url, args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
