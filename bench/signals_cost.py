"""What the token signals (confidence.token, top_k, compare_signals) cost: the score stage's time per choice, and a
pool's bytes per token for each top-k width it keeps.

Time: a SYNTHETIC pool (bench.synthetic_pool: 30 problems x 64 traces x ~1,000 tokens, top-20 kept) scored in this
process (score_pool, one worker) under each choice, in interleaved rounds (median [min-max] of 3, wall seconds).
Bytes: the simulated model's responses (bench.bench_pool, DeepSeek's wire format, top-20, ~3,000-token traces)
stored with their first k top-k entries, k = 0 (confidence only) .. 20: the log's bytes / tokens.

    python -m bench.signals_cost
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from bench.bench_pool import responses
from bench.measure import Run, Spread, interleaved
from bench.synthetic_pool import PoolShape, bench_params, write_workspace
from tracevote.core.config import load_params
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.datasets.problems import load_problems
from tracevote.deepconf.score import score_pool
from tracevote.sampling.ingest import parse_completion
from tracevote.store import codec
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.interchange import for_storage
from tracevote.store.pool import Pool

SHAPE = PoolShape(problems=30, traces=64, mean_tokens=1000, top_k=20)
ROUNDS = 3
WIDTHS = (0, 1, 5, 10, 20)
BASE = ConfidenceConfig(group_size=256, bottom_fraction=0.1, tail_tokens=256)
CHOICES = {
    "deepconf (default, stored C_i)": BASE,
    "deepconf, compare_signals": dataclasses.replace(BASE, compare_signals=True),
    "chosen": dataclasses.replace(BASE, token="chosen"),
    "entropy": dataclasses.replace(BASE, token="entropy"),
    "deepconf top_k 5": dataclasses.replace(BASE, top_k=5),
}


def score_seconds(folder: Path) -> dict[str, Spread]:
    workspace = write_workspace(folder, SHAPE, bench_params())
    params = load_params(workspace.params)
    pool = Pool(workspace.pool_root)
    problems = [(p.id, p.answer) for p in load_problems(workspace.problems)]

    def side(cfg: ConfidenceConfig) -> Run:
        started, cpu = time.monotonic(), time.process_time()
        rows = sum(s.scores.num_rows for s in score_pool(pool, problems, SHAPE.traces, cfg, params.answers,
                                                          workers=1))
        return Run(time.monotonic() - started, time.process_time() - cpu, str(rows))

    runs = interleaved({name: (lambda c=cfg: side(c)) for name, cfg in CHOICES.items()}, ROUNDS)
    return {name: Spread.of([run.wall for run in side_runs]) for name, side_runs in runs.items()}


def bytes_per_token(folder: Path) -> dict[int, float]:
    bodies = responses(16, 3000)
    samples = [dataclasses.replace(parse_completion(body, problem_id="bench", sample_id=i, latency_s=0.0,
                                                    keep_top_logprobs=True, expect_top_logprobs=20), top_tokens=None)
               for i, body in enumerate(bodies)]
    sizes = {}
    for width in WIDTHS:
        path = folder / f"k{width}.tvf"
        with FrameWriter(path) as writer:
            for sample in samples:
                kept = dataclasses.replace(sample, top_logprobs=sample.top_logprobs[:, :width]) if width else sample
                writer.append(sample.sample_id, codec.encode(for_storage(kept, width > 0)))
        sizes[width] = path.stat().st_size / sum(s.n_tokens for s in samples)
    return sizes


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for width, size in bytes_per_token(Path(folder)).items():
            kept = f"top-{width}" if width else "confidence only"
            print(f"pool bytes per token, {kept}: {size:.1f} B/token")
        seconds = score_seconds(Path(folder) / "pool")
    tokens = SHAPE.problems * SHAPE.traces * SHAPE.mean_tokens
    print(f"score stage, {SHAPE.problems} x {SHAPE.traces} traces x ~{SHAPE.mean_tokens} tokens (~{tokens / 1e6:.1f} M "
          f"tokens, SYNTHETIC), median [min-max] of {ROUNDS} interleaved rounds, wall seconds:")
    for name, spread in seconds.items():
        print(f"  {name}: {spread.show('.2f')}")


if __name__ == "__main__":
    main()
