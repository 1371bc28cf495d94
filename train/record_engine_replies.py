"""Record real replies of llama.cpp's server running the tinymath model, as test fixtures.

    .venv/bin/python train/record_engine_replies.py --base-url http://127.0.0.1:8931/v1 \\
        --heldout src/tracevote/datasets/data/tinymath_heldout.jsonl --out tests/fixtures/llamacpp

Each fixture is {"engine", "request", "status", "reply"}: "reply" is the JSON body, or for a streamed request
the list of the JSON chunks of its server-sent events (the closing "[DONE]" noted in "done").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from tinymath_vocab import user_message

ENGINE = "llama-cpp-python 0.3.36 (llama_cpp.server), CPU, model models/tinymath.gguf"


def base_request(problem: str) -> dict[str, Any]:
    return {"model": "tinymath", "messages": [{"role": "user", "content": user_message(problem)}],
            "temperature": 0.6, "max_tokens": 256, "logprobs": True, "top_logprobs": 20, "seed": 7}


def variants(problem: str) -> dict[str, dict[str, Any]]:
    """The requests recorded, by fixture name: the project's own, then one engine question each."""
    base = base_request(problem)
    return {
        "chat_top20": base,
        "chat_top20_stream": {**base, "stream": True},
        "chat_top3": {**base, "top_logprobs": 3},
        "chat_top0": {**base, "top_logprobs": 0},
        "chat_top1": {**base, "top_logprobs": 1},
        "chat_top5": {**base, "top_logprobs": 5},
        "chat_top25": {**base, "top_logprobs": 25},
        "chat_n3": {**base, "n": 3},
        "chat_length": {**base, "max_tokens": 5},
        "chat_unknown_arg": {**base, "not_a_real_argument": 1, "thinking": {"type": "disabled"}},
        "chat_no_logprobs": {key: value for key, value in base.items() if key not in ("logprobs", "top_logprobs")},
        "chat_system": {**base, "messages": [{"role": "system", "content": "You are a careful solver."},
                                             *base["messages"]]},
    }


def record(session: requests.Session, base_url: str, request: dict[str, Any]) -> dict[str, Any]:
    streamed = bool(request.get("stream"))
    response = session.post(f"{base_url}/chat/completions", json=request, timeout=600, stream=streamed)
    fixture: dict[str, Any] = {"engine": ENGINE, "request": request, "status": response.status_code}
    if not streamed:
        fixture["reply"] = response.json() if response.headers.get("content-type", "").startswith("application/json") \
            else response.text
        return fixture
    chunks, done = [], False
    for line in response.iter_lines(decode_unicode=True):
        if not line or not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data.strip() == "[DONE]":
            done = True
        else:
            chunks.append(json.loads(data))
    fixture["reply"], fixture["done"] = chunks, done
    return fixture


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--heldout", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", help="record only these fixtures (default: every one)")
    args = parser.parse_args(argv)
    problem = json.loads(args.heldout.read_text().splitlines()[0])["problem"]
    wanted = {name: request for name, request in variants(problem).items() if not args.only or name in args.only}
    record_all(wanted, args.base_url, args.out, record)
    return 0


def record_all(requests_by_name: dict[str, dict[str, Any]], base_url: str, out: Path,
               record_one: Callable[[requests.Session, str, dict[str, Any]], dict[str, Any]]) -> None:
    """Each request sent through `record_one` and its fixture written to out/<name>.json."""
    out.mkdir(parents=True, exist_ok=True)
    with requests.Session() as session:
        for name, request in requests_by_name.items():
            fixture = record_one(session, base_url, request)
            (out / f"{name}.json").write_text(json.dumps(fixture, ensure_ascii=False) + "\n")
            print(f"{name}: HTTP {fixture['status']}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
