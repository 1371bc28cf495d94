"""Record the shipped model's own solutions to held-out problems through llama.cpp's server, as a test fixture of
texts for the labelling of a pool's own solutions (tracevote.datasets.pool_steps; tests/datasets/test_pool_steps.py).

    .venv/bin/python train/record_own_solutions.py --base-url http://127.0.0.1:8931/v1 \\
        --heldout src/tracevote/datasets/data/tinymath_heldout.jsonl --out tests/fixtures/llamacpp/own_solutions.json

The fixture is {"engine", "request", "replies"}: the request's shared fields (the project's decoding: temperature
0.6; each request seeded), then per reply the problem id, its seed, the content and the finish reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import requests
from record_engine_replies import ENGINE
from tinymath_vocab import user_message

REQUEST = {"model": "tinymath", "temperature": 0.6, "max_tokens": 256}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--heldout", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--problems", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.heldout.read_text(encoding="utf-8").splitlines()[:args.problems]]
    replies: list[dict[str, Any]] = []
    with requests.Session() as session:
        for row in rows:
            for seed in range(args.seeds):
                request = {**REQUEST, "messages": [{"role": "user", "content": user_message(row["problem"])}],
                           "seed": seed}
                reply = session.post(f"{args.base_url}/chat/completions", json=request, timeout=600)
                reply.raise_for_status()
                choice = reply.json()["choices"][0]
                replies.append({"problem_id": row["id"], "seed": seed, "content": choice["message"]["content"],
                                "finish_reason": choice["finish_reason"]})
    fixture = {"engine": ENGINE, "request": REQUEST, "replies": replies}
    args.out.write_text(json.dumps(fixture, indent=1) + "\n", encoding="utf-8")
    print(f"{len(replies)} replies of {len(rows)} problems -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
