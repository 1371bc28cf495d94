"""The explorer's trace files: their bytes per token and the CPU they take to write, on the simulated model's traces
(SIMULATED; DeepSeek's wire format, top-20, ~3,000-token traces as at paper scale), then those figures at paper
scale (30 problems x 4,096 traces x ~3,000 tokens).

Each reply is parsed and stored as a build stores it (pool.keep_top_tokens on), decoded as the explorer reads a pool
(codec.decode, to_sample), turned into its trace page's data (trace_data.trace_record, top_record; the stops
left out, a few numbers a trace) and written as SiteWriter writes a chunk of 64 traces (script_json).

    python -m bench.explorer_trace_size
"""

from __future__ import annotations

import dataclasses
import time

from bench.bench_pool import responses
from bench.synthetic_pool import FIXTURE_PARAMS
from tracevote.core.config import load_params
from tracevote.explorer.sitefiles import script_json
from tracevote.explorer.trace_data import CHUNK, Window, top_chunk, top_record, trace_record
from tracevote.sampling.ingest import parse_completion
from tracevote.store import codec
from tracevote.store.records import Sample

PAPER_TOKENS = 30 * 4096 * 3000
TRACES, MEAN_TOKENS = CHUNK, 3000


def stored_samples() -> list[Sample]:
    """The simulated replies as a pool holds them, read back as the explorer reads them."""
    payloads = [codec.encode(parse_completion(body, problem_id="p", sample_id=i, latency_s=0.0, keep_top_logprobs=True,
                                              expect_top_logprobs=20, keep_top_tokens=True), keep_top_tokens=True)
                for i, body in enumerate(responses(TRACES, MEAN_TOKENS))]
    return [codec.to_sample(codec.decode(payload)) for payload in payloads]


def main() -> None:
    samples = stored_samples()
    cfg = Window.of(load_params(FIXTURE_PARAMS).confidence)
    tokens = sum(sample.n_tokens for sample in samples)
    started = time.process_time()
    chunk = script_json({"traces": [trace_record(sample, cfg, {}) for sample in samples]})
    top = script_json(top_chunk([top_record(sample) for sample in samples]))
    cpu = time.process_time() - started
    bare = script_json(top_chunk([top_record(dataclasses.replace(sample, top_tokens=None)) for sample in samples]))
    print(f"SIMULATED: {len(samples)} traces, {tokens} tokens, top-20")
    for name, size in (("trace chunk (text, lengths, confidence, chosen, curve)", len(chunk)),
                       ("alternatives with their strings (pool.keep_top_tokens: true)", len(top)),
                       ("alternatives without strings", len(bare))):
        print(f"  {name:<62} {size / tokens:6.1f} B/token, {size / tokens * PAPER_TOKENS / 1e9:6.1f} GB at paper "
              "scale")
    print(f"  CPU to write them (with strings): {cpu / tokens * 1e6:.2f} us/token, "
          f"{cpu / tokens * PAPER_TOKENS / 60:.0f} min at paper scale (decoding the pool not counted)")


if __name__ == "__main__":
    main()
