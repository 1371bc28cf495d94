"""Benchmark: the confidence ARITHMETIC only, in memory, vectorized vs a per-trace loop over top-k lists.

This is not what the user waits for: no pool is read, no process starts, no table is written, and the
baseline also derives C_i from top-k lists, which the official offline analysis never does (its pickles
hold C_i). The stage-level figure, against a faithful baseline, is bench_stage's.

The pool is SYNTHETIC, built directly in numpy (no model, no pool store): per problem, traces of
log-normal length around the target mean, top-20 logprobs as float32 (best first, descending),
0.3% absent (NaN) entries, and rare tokens with no top-k at all, some without a chosen logprob either.

Timed, on the same data in the same run:
- vectorized: `token_confidence` (top-k -> C_i) + `trace_measures` (C_i -> the four measures), per problem;
- official style: Python lists, one trace at a time: C_i from each token's top-k list, sliding windows
  with a running sum, np.partition for the bottom groups (as deepconf's analysis code). It runs on a
  subset of traces and its tokens/s is extrapolated to the pool (throughput is per token).
- score_problem: the measures plus answer extraction from synthetic texts (~4 characters per token).
Results of the two implementations are compared, so the speed-up is for the same numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from tracevote.answers.extract import answer_candidates
from tracevote.core.config import AnswersConfig, ConfidenceConfig
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


SCALES = {
    "full": Scale(30, 512, 3000, 32, ConfidenceConfig(group_size=2048, bottom_fraction=0.1, tail_tokens=2048)),
    "quick": Scale(2, 32, 400, 8, ConfidenceConfig(group_size=128, bottom_fraction=0.1, tail_tokens=128)),
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
    """Measured rows: name, value, unit, and ratio / note where relevant."""
    size = SCALES[scale]
    cfg = size.confidence
    tokens, seconds, score_seconds, first = 0, 0.0, 0.0, None
    for index in range(size.problems):
        problem = synthetic_problem(index, size)
        start = time.perf_counter()
        result = vectorized(problem, cfg)
        seconds += time.perf_counter() - start
        tokens += int(problem.offsets[-1])
        score_seconds += _time_score_problem(problem, cfg, index)
        if first is None:
            first = (problem, result)
    base_tokens, base_seconds, max_diff = _time_official_style(*first, size.baseline_traces, cfg)
    ours, theirs = tokens / seconds, base_tokens / base_seconds
    return [
        {"name": "arithmetic only, in memory: data", "value": tokens, "unit": "tokens",
         "note": f"synthetic, {size.problems} problems x {size.traces} traces, top-{TOP_K} float32"},
        {"name": "arithmetic only, in memory: vectorized top-k -> 4 measures", "value": ours, "unit": "tokens/s",
         "note": f"{seconds:.2f} s over the whole pool"},
        {"name": "arithmetic only, in memory: per-trace loop over top-k lists", "value": theirs, "unit": "tokens/s",
         "note": f"{size.baseline_traces} traces ({base_tokens} tokens) of problem 0, extrapolated per token"},
        {"name": "arithmetic only, in memory: speed-up vs the top-k list loop", "value": ours / theirs, "unit": "x",
         "ratio": ours / theirs, "note": f"same numbers: max relative difference {max_diff:.1e}"},
        {"name": "arithmetic only, in memory: score_problem incl. answer extraction", "value": tokens / score_seconds,
         "unit": "tokens/s", "note": "from C_i (as stored in the pool) to the score table rows"},
    ]


def _time_official_style(problem: SyntheticProblem, expected: np.ndarray, n_traces: int,
                         cfg: ConfidenceConfig) -> tuple[int, float, float]:
    """Tokens, seconds and max relative difference to `expected` of the baseline on the first traces."""
    offsets = problem.offsets
    inputs = [(problem.top[offsets[j]:offsets[j + 1]].tolist(), problem.chosen[offsets[j]:offsets[j + 1]].tolist())
              for j in range(n_traces)]
    start = time.perf_counter()
    results = [official_style(top_rows, chosen, cfg) for top_rows, chosen in inputs]
    seconds = time.perf_counter() - start
    diff = np.abs(np.array(results) - expected[:n_traces]) / np.abs(expected[:n_traces])
    return int(offsets[n_traces]), seconds, float(np.nanmax(diff))


def _time_score_problem(problem: SyntheticProblem, cfg: ConfidenceConfig, index: int) -> float:
    n = len(problem.offsets) - 1
    texts = synthetic_texts(n, np.diff(problem.offsets), np.random.default_rng(index))
    candidates = [answer_candidates(t) for t in texts]
    traces = ProblemTraces(f"bench-{index:02d}", np.arange(n), candidates, ["stop"] * n, problem.offsets,
                           token_confidence(problem.top, problem.chosen))
    start = time.perf_counter()
    score_problem(traces, gold=7, cfg=cfg, answers=AnswersConfig("last_integer", truncated_fallback=False))
    return time.perf_counter() - start

