"""Measure the shipped model's held-out accuracy through llama.cpp's server, as tracevote samples it.

    /work/llama-venv/bin/python -m llama_cpp.server --model models/tinymath.gguf --host 127.0.0.1 --port 8931 &
    .venv/bin/python train/measure_tinymath.py --base-url http://127.0.0.1:8931/v1 \\
        --heldout src/tracevote/datasets/data/tinymath_heldout.jsonl --manifest models/tinymath.json

One chat completion per problem and sample (the project's user message, temperature 0.6, top-20 logprobs, a
seed per request), each parsed by tracevote's own parser (sampling.ingest.parse_completion), graded by its
answer extractor. Writes the result into the manifest's "heldout" entry.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import requests
from tinymath_vocab import user_message

from tracevote.sampling.ingest import parse_completion


def ask(session: requests.Session, base_url: str, problem: str, *, temperature: float, top_logprobs: int,
        max_tokens: int, seed: int) -> tuple[bytes, float]:
    body = {"model": "tinymath", "messages": [{"role": "user", "content": user_message(problem)}],
            "temperature": temperature, "max_tokens": max_tokens, "logprobs": True, "top_logprobs": top_logprobs,
            "seed": seed}
    began = time.monotonic()
    response = session.post(f"{base_url}/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    return response.content, time.monotonic() - began


def wilson(right: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of right/total."""
    share = right / total
    centre = (share + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return round(centre - half, 4), round(centre + half, 4)


def measure(base_url: str, rows: list[dict[str, object]], samples: int, temperature: float,
            top_logprobs: int, max_tokens: int) -> dict[str, object]:
    right = total = tokens = 0
    finish: dict[str, int] = {}
    right_by_problem: list[int] = []
    began = time.monotonic()
    with requests.Session() as session:
        for index, row in enumerate(rows):
            right_by_problem.append(0)
            for sample_id in range(samples):
                body, latency = ask(session, base_url, str(row["problem"]), temperature=temperature,
                                    top_logprobs=top_logprobs, max_tokens=max_tokens,
                                    seed=index * 1000 + sample_id)
                sample = parse_completion(body, problem_id=str(row["id"]), sample_id=sample_id, latency_s=latency,
                                          keep_top_logprobs=True, expect_top_logprobs=top_logprobs)
                right += sample.answer == row["answer"]
                right_by_problem[-1] += sample.answer == row["answer"]
                total += 1
                tokens += sample.completion_tokens
                finish[sample.finish_reason] = finish.get(sample.finish_reason, 0) + 1
    return {"accuracy": round(right / total, 4), "right": right, "traces": total, "problems": len(rows),
            "samples_per_problem": samples, "wilson_95": wilson(right, total), "temperature": temperature,
            "top_logprobs": top_logprobs, "max_tokens": max_tokens, "mean_completion_tokens": round(tokens / total, 1),
            "finish_reasons": finish, "seconds": round(time.monotonic() - began, 1),
            "problems_always_right": right_by_problem.count(samples), "problems_never_right": right_by_problem.count(0),
            "problems_mixed": len(rows) - right_by_problem.count(samples) - right_by_problem.count(0)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--heldout", type=Path, required=True)
    parser.add_argument("--manifest", type=Path)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-logprobs", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    rows = [json.loads(line) for line in args.heldout.read_text().splitlines()]
    result = measure(args.base_url, rows, args.samples, args.temperature, args.top_logprobs, args.max_tokens)
    result["how"] = ("llama-cpp-python's server (llama_cpp.server), /v1/chat/completions, the model's chat "
                     "template, one request per trace with a seed, parsed by tracevote.sampling.ingest, graded "
                     "by tracevote.answers.extract: train/measure_tinymath.py")
    print(json.dumps(result, indent=2))
    if args.manifest:
        manifest = json.loads(args.manifest.read_text())
        manifest["heldout"] = {"file": str(args.heldout), **result}
        args.manifest.write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
