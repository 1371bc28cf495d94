"""Benchmark: wall and CPU time and peak memory of `aggregate` over the full evaluation grid, in process
(narrower than the stage: the paper-scale benchmark times `stages/aggregate.py` itself).

The score table is SYNTHETIC (no model): per problem a gold answer, a per-problem accuracy drawn
from Beta(2, 2), wrong answers spread over a few distractors, 3% invalid samples, measures that are
higher for correct samples (plus noise), and 0.5% valid samples without a confidence (NaN).
The grid is params.yaml's: every K in 1, 2, 4, ..., 512, 64 repeats, etas 0.1 and 0.9, four measures,
1000 bootstrap resamples, and online DeepConf (low and high, warmup 16) replayed from a synthetic stop
table: every trace of at least a window (2048 tokens) has 5-60 record lows falling to its `lowest`.
"""

from __future__ import annotations

import resource
import tracemalloc
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.figures import Figure
from bench.measure import interleaved, timed
from tracevote.core.config_deepconf import MEASURES, EvalConfig, OnlineConfig
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.score import SCORE_COLUMNS, STOP_COLUMNS

GROUP_SIZE = 2048
ONLINE = OnlineConfig(warmup=16, percentiles={"low": 90, "high": 10}, consensus=None)


@dataclass(frozen=True)
class Scale:
    problems: int
    samples: int
    repeat: int  # eval.repeat
    rounds: int  # timed runs of each side


SCALES = {"full": Scale(30, 512, 64, 3), "quick": Scale(4, 64, 8, 1)}


def synthetic_scores(problems: int, samples: int, seed: int = 0) -> pd.DataFrame:
    """A score table (SCORE_COLUMNS) of `problems` x `samples` synthetic rows."""
    rng = np.random.default_rng(seed)
    return pd.concat([_problem_rows(f"synth-{p:02d}", samples, rng) for p in range(problems)], ignore_index=True)


def _problem_rows(problem_id: str, n: int, rng: np.random.Generator) -> pd.DataFrame:
    gold = int(rng.integers(0, 1000))
    distractors = rng.integers(0, 1000, 6)
    answers = np.where(rng.random(n) < rng.beta(2, 2), gold, rng.choice(distractors, n, p=_zipf(6)))
    valid = rng.random(n) >= 0.03
    correct = valid & (answers == gold)
    frame = pd.DataFrame({
        "problem_id": problem_id, "sample_id": np.arange(n),
        "answer": pd.array(np.where(valid, answers, 0), dtype="Int64"), "correct": correct, "valid": valid,
        "n_tokens": rng.integers(500, 4096, n), "finish_reason": np.where(valid, "stop", "length"),
        "answer_source": np.where(valid, "boxed", "none")})
    frame.loc[~valid, "answer"] = pd.NA
    for measure in MEASURES:
        values = rng.normal(12.0, 1.0, n) + 0.8 * correct
        values[rng.random(n) < 0.005] = np.nan
        frame[measure] = values
    return frame[list(SCORE_COLUMNS)]


def synthetic_stops(scores: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """A stop table (STOP_COLUMNS) for `scores`: every trace with a full window falls to its `lowest` over
    5-60 record lows, one per window from its first (spent 2048, 2049, ...)."""
    rng = np.random.default_rng(seed)
    lowest = scores["lowest"].to_numpy(dtype=np.float64)
    n_tokens = scores["n_tokens"].to_numpy(dtype=np.int64)
    eligible = np.flatnonzero((n_tokens >= GROUP_SIZE) & np.isfinite(lowest))
    counts = np.minimum(rng.integers(5, 61, len(eligible)), n_tokens[eligible] - GROUP_SIZE + 1)
    trace = np.repeat(eligible, counts)
    starts = np.cumsum(counts) - counts
    index = np.arange(len(trace)) - np.repeat(starts, counts)  # record number within its trace
    remaining = np.repeat(counts, counts) - 1 - index  # records still to come; 0 for the lowest
    return pd.DataFrame({"problem_id": scores["problem_id"].to_numpy()[trace],
                         "sample_id": scores["sample_id"].to_numpy()[trace],
                         "spent": GROUP_SIZE + index, "value": lowest[trace] + 0.02 * remaining},
                        columns=list(STOP_COLUMNS))


def _zipf(n: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1)
    return weights / weights.sum()


def grid(repeat: int, max_k: int) -> EvalConfig:
    ks = tuple(2**i for i in range(max_k.bit_length()) if 2**i <= max_k)
    return EvalConfig(k=ks, repeat=repeat, seed=0, etas=(0.1, 0.9), bootstrap=1000)


def run(scale: str = "full") -> list[dict]:
    """In-process aggregate with and without online replay, interleaved rounds; memory of one more run."""
    size = SCALES[scale]
    scores = synthetic_scores(size.problems, size.samples)
    stops = synthetic_stops(scores)
    cfg = grid(size.repeat, size.samples)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = aggregate(scores, cfg, online=ONLINE, stops=stops)  # warm-up, and the sanity figure
    rss_delta = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    runs = interleaved({"online": lambda: timed(lambda: aggregate(scores, cfg, online=ONLINE, stops=stops)),
                        "offline": lambda: timed(lambda: aggregate(scores, cfg))}, size.rounds)
    tracemalloc.start()
    aggregate(scores, cfg, online=ONLINE, stops=stops)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    grid_note = (f"NARROWER than the stage (in process: no start-up, no Parquet read, no JSON written); synthetic "
                 f"{size.problems} x {size.samples}, K {cfg.k[0]}..{cfg.k[-1]}, {cfg.repeat} repeats, "
                 f"{len(result.methods)} methods + {len(result.online_methods)} online, {cfg.bootstrap} resamples; "
                 f"{size.rounds} interleaved rounds")
    return [figure.to_json() for figure in (
        Figure("aggregate in process, with online replay", "s", [r.wall for r in runs["online"]],
               cpu=[r.cpu for r in runs["online"]], note=f"{grid_note}; {len(stops):,} stop records"),
        Figure("aggregate in process, without online replay", "s", [r.wall for r in runs["offline"]],
               cpu=[r.cpu for r in runs["offline"]], note="the same grid, offline methods only"),
        Figure("aggregate in process: peak traced memory", "MiB", [peak / 2**20], note="tracemalloc, one run"),
        Figure("aggregate in process: max RSS growth", "MiB", [rss_delta / 1024],
               note="ru_maxrss delta over the first run (0 when below an earlier peak)"),
        Figure("aggregate in process: cons@max K (sanity)", "accuracy", [result.accuracy_at("cons", cfg.k[-1]).mean],
               note=f"pass1 {result.accuracy_at('pass1', cfg.k[-1]).mean:.3f}"),
    )]
