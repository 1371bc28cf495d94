"""Benchmark: the score stage from the pool on disk, against the official offline analysis from its pickles.

Built once in a temporary folder, outside the timing (bench.synthetic_pool): a SYNTHETIC pool with top-20
kept, written through the store's own write path, one manifest per pool size, and for each size the same
traces as the official offline runs store them: one `deepconf_simple_qid<q>_rid0_<time>.pkl` per problem
holding text, token_ids and the very per-token confidences the pool holds (as Python float lists).

Timed, whole processes as a user starts them, interleaved (every size, each side in turn, per round):
- ours: `python stages/score.py` as DVC runs it, with TRACEVOTE_WORKERS=1 and =2;
- the official offline analysis (bench/official_offline.py, run as a script): unpickle, four measures.
Per round and side, the marginal rate is the slope of a least-squares line of seconds against tokens over
the sizes (start-up is the intercept); wall and CPU seconds (process + children) both. The baseline's
measures are compared with the stage's score table, so the ratio is for the same numbers.
"""

from __future__ import annotations

import json
import pickle
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.figures import Figure
from bench.measure import Run, fit_rate, interleaved, run_process, stage_env
from bench.synthetic_pool import ROOT, PoolShape, Workspace, bench_params, draw_problem, samples, write_workspace
from tracevote.core.config_deepconf import MEASURES
from tracevote.store.pool import Pool, write_manifest
from tracevote.store.records import Sample

SIDES = ("ours, 1 worker", "ours, 2 workers", "official")
OFFICIAL = "official offline analysis (unpickle + 4 measures per trace), whole process"


@dataclass(frozen=True)
class Scale:
    shape: PoolShape
    sizes: tuple[int, ...]  # samples per problem (the manifest's n_pool) of the timed runs
    window: int  # group_size and tail_tokens
    repeats: int
    end_to_end: int  # the size whose whole-process seconds are printed
    warm_up: bool = True  # a run of each side first; quick scale (the suite's smoke run) times nothing worth steadying


# The fit spans 24 to 192 samples per problem (2.5 M to 20 M tokens): the stage's marginal time over 24 to 96 alone
# (~0.15 s, 20 ns a token) was below the wall-time noise of a shared machine, so most rounds fitted a slope <= 0.


SCALES = {
    "full": Scale(PoolShape(30, 192, 3300, 20), (24, 96, 192), 2048, 5, end_to_end=96),
    "quick": Scale(PoolShape(2, 16, 300, 20), (8, 16), 64, 1, end_to_end=16, warm_up=False),
}


@dataclass(frozen=True)
class Bench:
    workspace: Workspace
    scale: Scale
    tokens: dict[int, int]  # size -> tokens of the first `size` traces of every problem


def prepare(folder: Path, scale: Scale) -> Bench:
    params = bench_params()
    params["confidence"].update(group_size=scale.window, tail_tokens=scale.window)
    workspace = write_workspace(folder, scale.shape, params, workers=2)
    pool = Pool(workspace.pool_root)
    for size in scale.sizes:
        write_manifest(manifest_of(workspace, size), pool, "bench", size, list(workspace.problem_ids))
    tokens = {size: 0 for size in scale.sizes}
    for index, problem_id in enumerate(workspace.problem_ids):
        draw = draw_problem(index, scale.shape)
        traces = [official_trace(sample) for sample in samples(problem_id, draw)]
        for size in scale.sizes:
            write_pickle(pickles_of(workspace, size), index, draw.gold, traces[:size])
            tokens[size] += int(draw.offsets[size])
    return Bench(workspace, scale, tokens)


def official_trace(sample: Sample) -> dict:
    """A trace as deepconf-offline.py pickles it; confs are the pool's C_i, as float64 like the stage reads them."""
    confs = np.asarray(sample.token_confidence, dtype=np.float64).tolist()
    return {"stop_reason": sample.finish_reason, "text": sample.text, "token_ids": list(range(len(confs))),
            "num_tokens": len(confs), "confs": confs, "extracted_answer": str(sample.answer)}


def write_pickle(folder: Path, index: int, gold: int, traces: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"deepconf_simple_qid{index}_rid0_20250101_000000.pkl").open("wb") as f:
        pickle.dump({"question_id": index, "ground_truth": str(gold), "all_traces": traces}, f)


def manifest_of(workspace: Workspace, size: int) -> Path:
    return workspace.folder / "pools" / f"bench-{size}.json"


def pickles_of(workspace: Workspace, size: int) -> Path:
    return workspace.folder / "official" / str(size)


def score_command(bench: Bench, size: int) -> list[str]:
    out = bench.workspace.folder / "data" / "scores" / f"bench-{size}.parquet"
    return [sys.executable, str(ROOT / "stages" / "score.py"), "--params", str(bench.workspace.params),
            "--problems", str(bench.workspace.problems), "--manifest", str(manifest_of(bench.workspace, size)),
            "--out", str(out), "--stops", str(out.with_suffix(".stops.parquet"))]


def official_command(bench: Bench, size: int) -> list[str]:
    window = str(bench.scale.window)
    return [sys.executable, str(ROOT / "bench" / "official_offline.py"), "--outputs",
            str(pickles_of(bench.workspace, size)), "--out", str(bench.workspace.folder / f"official-{size}.npy"),
            "--window", window, "--tail", window]


def sides(bench: Bench, size: int) -> dict[str, Callable[[], Run]]:
    folder = bench.workspace.folder
    return {
        SIDES[0]: lambda: run_process(score_command(bench, size), folder, stage_env(TRACEVOTE_WORKERS="1")),
        SIDES[1]: lambda: run_process(score_command(bench, size), folder, stage_env(TRACEVOTE_WORKERS="2")),
        SIDES[2]: lambda: run_process(official_command(bench, size), folder, stage_env()),
    }


def timed_rounds(bench: Bench) -> list[dict[str, dict[int, Run]]]:
    """Per round, per side, per size: one run. A warm-up run of each side first (bytecode and page cache), unless
    the scale has none."""
    if bench.scale.warm_up:
        for side in sides(bench, bench.scale.sizes[-1]).values():
            side()
    rounds = []
    for _ in range(bench.scale.repeats):
        runs: dict[str, dict[int, Run]] = {name: {} for name in SIDES}
        for size in bench.scale.sizes:
            for name, side_runs in interleaved(sides(bench, size), 1).items():
                runs[name][size] = side_runs[0]
        rounds.append(runs)
    return rounds


def rates(bench: Bench, rounds: list[dict[str, dict[int, Run]]], side: str, cpu: bool) -> list[float]:
    """Per round: tokens per (wall or CPU) second from the fit over the sizes."""
    tokens = [bench.tokens[size] for size in bench.scale.sizes]
    return [fit_rate(tokens, [(run.cpu if cpu else run.wall) for run in (r[side][s] for s in bench.scale.sizes)])
            for r in rounds]


def max_relative_difference(bench: Bench, size: int) -> float:
    table = bench.workspace.folder / "data" / "scores" / f"bench-{size}.parquet"
    ours = pd.read_parquet(table).sort_values(["problem_id", "sample_id"])[list(MEASURES)].to_numpy()
    theirs = np.load(bench.workspace.folder / f"official-{size}.npy")
    return float(np.nanmax(np.abs(ours - theirs) / np.abs(theirs)))


def run(scale: str = "full") -> list[dict]:
    size = SCALES[scale]
    with tempfile.TemporaryDirectory(prefix="tracevote-bench-") as tmp:
        bench = prepare(Path(tmp) / "w", size)
        rounds = timed_rounds(bench)
        difference = max_relative_difference(bench, size.sizes[-1])
    return [figure.to_json() for figure in figures(bench, rounds, difference)]


def figures(bench: Bench, rounds: list[dict[str, dict[int, Run]]], difference: float) -> list[Figure]:
    shape, largest = bench.scale.shape, bench.scale.end_to_end
    pool = (f"synthetic pool, {shape.problems} problems x {', '.join(map(str, bench.scale.sizes))} samples, "
            f"~{shape.mean_tokens} tokens each, top-{shape.top_k} kept; {bench.scale.repeats} interleaved rounds")
    result = []
    for side, workers in ((SIDES[0], 1), (SIDES[1], 2)):
        result.append(Figure(
            f"score stage, marginal rate, {workers} worker{'s' * (workers > 1)}", "tokens/s",
            rates(bench, rounds, side, False), rates(bench, rounds, SIDES[2], False),
            cpu=rates(bench, rounds, side, True), baseline_cpu=rates(bench, rounds, SIDES[2], True),
            cpu_unit="tokens/CPU-s", baseline_name=OFFICIAL,
            note=f"slope of a least-squares fit of seconds against tokens per round; {pool}"))
    for side, workers in ((SIDES[0], 1), (SIDES[1], 2)):
        result.append(Figure(
            f"score stage, end to end, {largest} samples/problem, {workers} worker{'s' * (workers > 1)}", "s",
            [r[side][largest].wall for r in rounds], [r[SIDES[2]][largest].wall for r in rounds],
            higher_is_better=False, cpu=[r[side][largest].cpu for r in rounds],
            baseline_cpu=[r[SIDES[2]][largest].cpu for r in rounds], baseline_name=OFFICIAL,
            note=f"{bench.tokens[largest]:,} tokens, start-up included; {official_split(rounds, largest)}"))
    result.append(Figure("official vs score stage: max relative difference of the 4 measures", "relative",
                         [difference], note="same traces: the stage's score table against the baseline's measures"))
    return result


def official_split(rounds: list[dict[str, dict[int, Run]]], size: int) -> str:
    """'official: unpickling 40%, measures 55% of its wall time' (the rest is start-up), median over rounds."""
    parts = [json.loads(r[SIDES[2]][size].output.splitlines()[-1]) for r in rounds]
    wall = float(np.median([r[SIDES[2]][size].wall for r in rounds]))
    load = float(np.median([p["load_s"] for p in parts])) / wall
    measure = float(np.median([p["measure_s"] for p in parts])) / wall
    return f"official: unpickling {load:.0%}, measures {measure:.0%} of its wall time (the rest: start-up)"
