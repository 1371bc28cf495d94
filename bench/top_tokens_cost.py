"""What pool.keep_top_tokens costs: a stored sample's bytes per token with the alternatives' token strings and
without, on the simulated model's replies and on the recorded replies of real engines (tests/fixtures/).

Each reply is parsed as a build parses it (parse_completion, top-k kept) and encoded as a build stores it
(codec.encode), once with keep_top_tokens and once without; the figure is the difference in payload bytes over the
reply's tokens (the strings are one zstd-compressed JSON block, so repeated tokens cost little).

    python -m bench.top_tokens_cost
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from bench.bench_pool import responses
from tracevote.sampling.ingest import parse_completion
from tracevote.store import codec

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
REAL_REPLIES = {  # the recorded replies with top-20 (the pool's default width): engine -> file
    "llama.cpp (tinymath)": "llamacpp/chat_top20.json",
    "llama.cpp (random weights)": "llamacpp/random_weights_chat_top20.json",
    "vLLM (Qwen3-8B)": "reasoning/vllm_parser.json",
    "SGLang (Qwen3-8B)": "reasoning/sglang_parser.json",
}


@dataclass(frozen=True)
class Cost:
    tokens: int
    top_k: int
    without: int  # payload bytes without the strings
    with_strings: int

    @property
    def per_token(self) -> float:
        return (self.with_strings - self.without) / max(self.tokens, 1)


def reply_body(path: Path) -> bytes:
    """A fixture's reply: the file itself, or its "reply" when it records the request beside it."""
    doc = orjson.loads(path.read_bytes())
    return orjson.dumps(doc["reply"]) if "reply" in doc else path.read_bytes()


def cost_of(bodies: list[bytes], top_k: int) -> Cost:
    """The payload bytes of `bodies` stored with and without the alternatives' strings, and their tokens."""
    tokens = without = with_strings = 0
    for i, body in enumerate(bodies):
        sample = parse_completion(body, problem_id="p", sample_id=i, latency_s=0.0, keep_top_logprobs=True,
                                  expect_top_logprobs=top_k, keep_top_tokens=True)
        tokens += sample.n_tokens
        without += len(codec.encode(sample))
        with_strings += len(codec.encode(sample, keep_top_tokens=True))
    return Cost(tokens, top_k, without, with_strings)


def main() -> None:
    rows = {"simulated model (SIMULATED; 8 replies, ~3,600 tokens)": cost_of(responses(8, 3000), 20)}
    rows |= {name: cost_of([reply_body(FIXTURES / path)], 20) for name, path in REAL_REPLIES.items()}
    print(f"{'replies':<55} {'tokens':>7} {'B/token without':>16} {'with strings':>13} {'cost B/token':>13}")
    for name, cost in rows.items():
        print(f"{name:<55} {cost.tokens:>7} {cost.without / cost.tokens:>16.2f} "
              f"{cost.with_strings / cost.tokens:>13.2f} {cost.per_token:>13.2f}")


if __name__ == "__main__":
    main()
