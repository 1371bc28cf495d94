"""A SYNTHETIC pool written fast, straight in the project's pool format: no server, no model.

Each problem's traces are drawn at once in numpy, then each trace goes through the store's own write path
(codec.encode, Pool.writer), so `stages/score.py` reads it like any built pool. Beside it: params.yaml,
the normalized problems file data/bench.jsonl and the manifest pools/bench.json, laid out as DVC lays them.

Per problem: a gold answer in 0..999 and an accuracy from Beta(2, 2); per trace a log-normal length around
the mean (sigma 0.35), a boxed answer (right with that chance, else one of 6 distractors), and per-token
confidences C_i = a trace level (higher when right) + a slow random walk + noise, so window means drift as
real ones do and the stop table has real-looking record lows. Tokens are 4-byte pieces of a small
vocabulary, the text their concatenation. With `top_k` the top-k logprobs are kept too (best first,
scaled so that C_i, computed from them as ingestion does, follows the same levels).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import yaml

from tracevote.core.config import load_params
from tracevote.datasets.problems import load_problems
from tracevote.sampling.prompts import setting_messages
from tracevote.store import codec
from tracevote.store.logprobs import token_confidence
from tracevote.store.pool import Pool, Setting, write_manifest
from tracevote.store.records import Sample

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_PARAMS = ROOT / "tests" / "fixtures" / "params.yaml"
VOCAB = np.array(["we c", "heck", " 3+4", "=7. ", "so, ", "the ", "sum ", "is a", " x_1", "(n+1", ") = ", "\\fra",
                  "c{1}", "{2} ", "then", " we "])
DATASET = "bench"


@dataclass(frozen=True)
class PoolShape:
    problems: int
    traces: int  # per problem
    mean_tokens: int
    top_k: int  # 0: confidence only, as with pool.keep_top_logprobs: false


@dataclass(frozen=True, eq=False)
class ProblemDraw:
    """One problem's traces, flat: trace j owns tokens offsets[j]:offsets[j + 1]."""

    gold: int
    answers: np.ndarray  # int [traces]
    offsets: np.ndarray  # int64 [traces + 1]
    token_ids: np.ndarray  # int [tokens], into VOCAB
    chosen: np.ndarray  # float32 [tokens]: the chosen token's logprob
    top: np.ndarray | None  # float32 [tokens, top_k]
    confidence: np.ndarray  # float32 [tokens]: C_i as the pool stores it


@dataclass(frozen=True)
class Workspace:
    folder: Path
    params: Path
    problems: Path
    manifest: Path
    pool_root: Path
    problem_ids: tuple[str, ...]


def problem_ids(shape: PoolShape) -> tuple[str, ...]:
    return tuple(f"bench-{p:02d}" for p in range(shape.problems))


def draw_problem(index: int, shape: PoolShape) -> ProblemDraw:
    rng = np.random.default_rng([2508, index])
    lengths = np.clip(rng.lognormal(math.log(shape.mean_tokens), 0.35, shape.traces), 16,
                      4 * shape.mean_tokens).astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    gold = gold_of(index)
    right = rng.random(shape.traces) < rng.beta(2, 2)
    answers = np.where(right, gold, rng.choice(rng.integers(0, 1000, 6), shape.traces))
    levels = rng.normal(12.0, 1.0, shape.traces) + 0.8 * right
    confidence = _confidence(rng, offsets, levels)
    chosen = -rng.standard_exponential(len(confidence), dtype=np.float32) * np.float32(0.3)
    top = None
    if shape.top_k:
        top, chosen = _top_logprobs(rng, confidence, shape.top_k)
        confidence = token_confidence(top, chosen).astype(np.float32)
    return ProblemDraw(gold, answers, offsets, rng.integers(0, len(VOCAB), int(offsets[-1])), chosen, top, confidence)


def _confidence(rng: np.random.Generator, offsets: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Per token: the trace's level + a random walk restarted at each trace + noise, floored at 0.05."""
    lengths = np.diff(offsets)
    steps = rng.normal(0.0, 0.03, int(offsets[-1]))
    walk = np.cumsum(steps)
    walk -= np.repeat(walk[offsets[:-1]] - steps[offsets[:-1]], lengths)  # each trace's walk starts at 0
    values = np.repeat(levels, lengths) + walk + rng.normal(0.0, 2.0, len(walk))
    return np.maximum(values, 0.05).astype(np.float32)


def _top_logprobs(rng: np.random.Generator, confidence: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best-first top-k rows whose negated mean is `confidence`; the chosen token is the best."""
    top = -np.cumsum(rng.standard_exponential((len(confidence), k), dtype=np.float32), axis=1)
    top *= (confidence / -top.mean(axis=1))[:, None]
    return top, top[:, 0].copy()


def samples(problem_id: str, draw: ProblemDraw) -> Iterator[Sample]:
    for j, (start, end) in enumerate(zip(draw.offsets[:-1].tolist(), draw.offsets[1:].tolist(), strict=True)):
        tokens = VOCAB[draw.token_ids[start:end]].tolist()
        tokens[-1] = f"\\boxed{{{int(draw.answers[j])}}}"
        top = None if draw.top is None else draw.top[start:end]
        yield Sample(problem_id=problem_id, sample_id=j, text="".join(tokens), tokens=tokens,
                     token_logprobs=draw.chosen[start:end], top_logprobs=top,
                     top_tokens=None, token_confidence=draw.confidence[start:end], answer=int(draw.answers[j]),
                     finish_reason="stop", prompt_tokens=120, completion_tokens=end - start, latency_s=0.0)


def write_problem(job: tuple[Path, int, PoolShape]) -> int:
    """Draw and store one problem (a process-pool job); returns its tokens."""
    pool_root, index, shape = job
    draw = draw_problem(index, shape)
    problem_id = problem_ids(shape)[index]
    pool = Pool(pool_root)
    with pool.writer(problem_id) as writer:
        for sample in samples(problem_id, draw):
            writer.append(sample.sample_id, codec.encode(sample))
    pool.write_confidence_blocks([problem_id])  # as build_pool does once a problem's log is written
    return int(draw.offsets[-1])


def bench_params() -> dict[str, Any]:
    """The tests' fixture params with one problems dataset, `bench` (data/bench.jsonl), that every method runs on."""
    params_data = yaml.safe_load(FIXTURE_PARAMS.read_text())
    params_data["datasets"] = {DATASET: {**params_data["datasets"]["aime_2025"], "source": {
        **params_data["datasets"]["aime_2025"]["source"], "hf_dataset": None, "path": "data/raw/bench.jsonl",
        "watch": "data/raw/bench.jsonl"}},
        "processbench_gsm8k": params_data["datasets"]["processbench_gsm8k"]}  # the critique's, never read here
    params_data["critique"]["datasets"] = ["processbench_gsm8k"]
    params_data["deepconf"]["datasets"] = [DATASET]
    params_data["debate"].update(datasets=[DATASET], contest_halves=[])
    params_data["grading"]["runs"] = {"pool_bench": {"dataset": DATASET, "predictions": "pools/bench.json"}}
    return params_data


def write_workspace(folder: Path, shape: PoolShape, params_data: dict[str, Any], workers: int = 1) -> Workspace:
    """params.yaml, data/bench.jsonl, the pool (problems written in `workers` processes) and its manifest."""
    params_data = {**params_data, "model": {**params_data["model"], "backend": "sim"}}
    params_data["pool"] = {**params_data["pool"], "n_pool": shape.traces, "keep_top_logprobs": shape.top_k > 0}
    # the committed grid (K up to 512, the paper's voting budget), capped at the pool's traces
    ks = [k for k in params_data["eval"]["k"] if k <= shape.traces]
    params_data["eval"] = {**params_data["eval"], "k": ks}
    params_data["report"] = {**params_data["report"], "k": ks[-1]}
    params_path = folder / "params.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    params_path.write_text(yaml.safe_dump(params_data))
    ids = problem_ids(shape)
    problems = folder / "data" / f"{DATASET}.jsonl"
    problems.parent.mkdir(parents=True, exist_ok=True)
    golds = [gold_of(index) for index in range(shape.problems)]
    problems.write_bytes(b"".join(orjson.dumps({"id": i, "problem": f"Problem {i}.", "answer": gold}) + b"\n"
                                  for i, gold in zip(ids, golds, strict=True)))
    setting = Setting.from_params(load_params(params_path))
    pool = Pool.open_or_create(folder / "pools" / DATASET, setting, simulated=True)
    pool.register(setting_messages(load_problems(problems), setting))
    jobs = [(pool.root, index, shape) for index in range(shape.problems)]
    if workers > 1:
        with ProcessPoolExecutor(workers) as executor:
            list(executor.map(write_problem, jobs))
    else:
        for job in jobs:
            write_problem(job)
    manifest = folder / "pools" / f"{DATASET}.json"
    write_manifest(manifest, pool, DATASET, shape.traces, list(ids))
    return Workspace(folder, params_path, problems, manifest, pool.root, ids)


def gold_of(index: int) -> int:
    """Problem `index`'s gold answer (its own seed, so the problems file needs no trace drawn)."""
    return int(np.random.default_rng([2508, index, 0]).integers(0, 1000))
