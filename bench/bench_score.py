"""Benchmark: the confidence ARITHMETIC only, in memory, vectorized vs a per-trace loop over top-k lists.

This is not what the user waits for: no pool is read, no process starts, no table is written, and the
baseline also derives C_i from top-k lists, which the official offline analysis never does (its pickles
hold C_i). The stage-level figure, against a faithful baseline, is bench_stage's.

The pool is SYNTHETIC, built directly in numpy (no model, no pool store): per problem, traces of
log-normal length around the target mean, top-20 logprobs as float32 (best first, descending),
0.3% absent (NaN) entries, and rare tokens with no top-k at all, some without a chosen logprob either.

Timed on the same traces (the first 32 of a problem), in interleaved rounds (median, min, max; wall, CPU):
- vectorized: `token_confidence` (top-k -> C_i) + `trace_measures` (C_i -> the four measures);
- official style: Python lists, one trace at a time: C_i from each token's top-k list, sliding windows
  with a running sum, np.partition for the bottom groups (as deepconf's analysis code);
- score_problem alone, on a whole problem: the measures plus answer extraction from synthetic texts.
Results of the two implementations are compared, so the speed-up is for the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bench.figures import Figure
from bench.measure import Run, interleaved, timed
from tracevote.answers.extract import answer_candidates
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.score import score_problem
from tracevote.store.logprobs import token_confidence
from tracevote.store.records import ProblemTraces

TOP_K = 20


@dataclass(frozen=True)
class Scale:
    problems: int
    traces: int
    mean_tokens: int
    baseline_traces: int
    confidence: ConfidenceConfig
    repeats: int


SCALES = {
    "full": Scale(1, 512, 3000, 32, ConfidenceConfig(group_size=2048, bottom_fraction=0.1, tail_tokens=2048), 5),
    "quick": Scale(1, 32, 400, 8, ConfidenceConfig(group_size=128, bottom_fraction=0.1, tail_tokens=128), 2),
}


@dataclass(frozen=True, eq=False)
class SyntheticProblem:
    top: np.ndarray  # float32 [tokens, TOP_K]
    chosen: np.ndarray  # float32 [tokens]
    offsets: np.ndarray  # int64 [traces + 1]


def synthetic_problem(index: int, scale: Scale) -> SyntheticProblem:
    rng = np.random.default_rng([2508, index])
    lengths = np.clip(rng.lognormal(math.log(scale.mean_tokens), 0.35, scale.traces), 16, 4 * scale.mean_tokens)
    offsets = np.concatenate(([0], np.cumsum(lengths.astype(np.int64))))
    n = int(offsets[-1])
    # best-first logprobs: a small first gap, then exponential steps down
    top = -np.cumsum(rng.standard_exponential((n, TOP_K), dtype=np.float32) * np.float32(0.6), axis=1)
    top[:, 0] *= np.float32(0.1)
    chosen = top[:, 0].copy()
    top.reshape(-1)[rng.integers(0, top.size, top.size * 3 // 1000)] = np.nan
    bare = rng.integers(0, n, max(1, n // 2000))
    top[bare] = np.nan
    chosen[bare[::4]] = np.nan
    return SyntheticProblem(top=top, chosen=chosen, offsets=offsets)


def vectorized(problem: SyntheticProblem, cfg: ConfidenceConfig) -> np.ndarray:
    """[traces, 4] avg, bottom10, lowest, tail: the computation the pool + score stages do."""
    confidence = token_confidence(problem.top, problem.chosen)
    n = len(problem.offsets) - 1
    traces = ProblemTraces("bench", np.arange(n), [answer_candidates("")] * n, ["stop"] * n, problem.offsets,
                           confidence)
    measures = trace_measures(traces, cfg)
    return np.stack([measures.avg, measures.bottom10, measures.lowest, measures.tail], axis=1)


def official_style(top_rows: list[list[float]], chosen: list[float], cfg: ConfidenceConfig) -> list[float]:
    """One trace, as Python lists: C_i per token, running-sum windows, bottom groups by np.partition."""
    confs = []
    for row, logprob in zip(top_rows, chosen, strict=True):
        present = [v for v in row if -9999 < v < math.inf]
        if present:
            confs.append(-sum(present) / len(present))
        elif -9999 < logprob < math.inf:
            confs.append(-logprob)
    if not confs:
        return [math.nan] * 4
    avg = sum(confs) / len(confs)
    window = cfg.group_size
    if len(confs) < window:
        groups = [avg]
    else:
        total = sum(confs[:window])
        groups = [total / window]
        for i in range(1, len(confs) - window + 1):
            total += confs[i + window - 1] - confs[i - 1]
            groups.append(total / window)
    n_bottom = max(1, int(len(groups) * cfg.bottom_fraction))
    bottom = float(np.mean(np.partition(groups, n_bottom - 1)[:n_bottom]))
    tail = confs[-cfg.tail_tokens:]
    return [avg, bottom, min(groups), sum(tail) / len(tail)]


def synthetic_texts(n: int, lengths: np.ndarray, rng: np.random.Generator) -> list[str]:
    filler = "We compute the sum 3 + 4 = 7 and check the case n = 12. " * 8
    texts = []
    for length, answer in zip(lengths, rng.integers(0, 1000, n), strict=True):
        body = filler * max(1, int(length) * 4 // len(filler))
        texts.append(f"{body}Therefore the answer is $\\boxed{{{answer}}}$.")
    return texts


def run(scale: str = "full") -> list[dict]:
    """Vectorized vs the per-trace list loop on the same traces, interleaved rounds; score_problem alone."""
    size = SCALES[scale]
    cfg = size.confidence
    problem = synthetic_problem(0, size)
    subset = first_traces(problem, size.baseline_traces)
    inputs = list_inputs(subset)
    sides = {"vectorized": lambda: timed(lambda: vectorized(subset, cfg)),
             "loop": lambda: timed(lambda: [official_style(top, chosen, cfg) for top, chosen in inputs])}
    runs = interleaved(sides, size.repeats)
    tokens = int(subset.offsets[-1])
    difference = max_difference(vectorized(subset, cfg), [official_style(t, c, cfg) for t, c in inputs])
    score_runs = [_time_score_problem(problem, cfg, 0) for _ in range(size.repeats)]
    what = f"{size.baseline_traces} synthetic traces ({tokens:,} tokens), top-{TOP_K} float32; {size.repeats} rounds"
    return [figure.to_json() for figure in (
        Figure("arithmetic only, in memory: top-k -> 4 measures", "tokens/s", rates(tokens, runs["vectorized"]),
               rates(tokens, runs["loop"]), cpu=rates(tokens, runs["vectorized"], cpu=True),
               baseline_cpu=rates(tokens, runs["loop"], cpu=True), cpu_unit="tokens/CPU-s",
               baseline_name="per-trace loop over top-k lists",
               note=f"{what}; same numbers: max relative difference {difference:.1e}"),
        Figure("arithmetic only, in memory: score_problem incl. answer extraction", "tokens/s",
               rates(int(problem.offsets[-1]), score_runs), cpu=rates(int(problem.offsets[-1]), score_runs, cpu=True),
               cpu_unit="tokens/CPU-s", note=f"from C_i to the score table rows, {size.traces} traces"),
    )]


def rates(tokens: int, runs: list[Run], cpu: bool = False) -> list[float]:
    return [tokens / (run.cpu if cpu else run.wall) for run in runs]


def first_traces(problem: SyntheticProblem, n: int) -> SyntheticProblem:
    end = int(problem.offsets[n])
    return SyntheticProblem(problem.top[:end], problem.chosen[:end], problem.offsets[:n + 1])


def list_inputs(problem: SyntheticProblem) -> list[tuple[list[list[float]], list[float]]]:
    """Per trace, its top-k rows and chosen logprobs as Python lists (made outside the timing)."""
    offsets = problem.offsets
    return [(problem.top[offsets[j]:offsets[j + 1]].tolist(), problem.chosen[offsets[j]:offsets[j + 1]].tolist())
            for j in range(len(offsets) - 1)]


def max_difference(expected: np.ndarray, results: list[list[float]]) -> float:
    return float(np.nanmax(np.abs(np.array(results) - expected) / np.abs(expected)))


def _time_score_problem(problem: SyntheticProblem, cfg: ConfidenceConfig, index: int) -> Run:
    n = len(problem.offsets) - 1
    texts = synthetic_texts(n, np.diff(problem.offsets), np.random.default_rng(index))
    candidates = [answer_candidates(t) for t in texts]
    traces = ProblemTraces(f"bench-{index:02d}", np.arange(n), candidates, ["stop"] * n, problem.offsets,
                           token_confidence(problem.top, problem.chosen))
    answers = AnswersConfig("last_integer", truncated_fallback=False)
    return timed(lambda: score_problem(traces, gold=7, cfg=cfg, answers=answers))
