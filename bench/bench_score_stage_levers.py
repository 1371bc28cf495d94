"""Benchmark for issue 24 item 2: the score stage from a pool on disk against the official offline analysis,
and before/after comparisons of code trees (levers), all interleaved and summarised by the median.

    python -m bench.bench_score_stage_levers --problems 30 --traces 512 --tokens 3300 --repeats 5 \
        --tree before=/tmp/score24-base --tree after=. --workers 1 2 [--official]

Each repetition runs, in turn, every (tree, workers) variant of `python stages/score.py` as a subprocess
(what the user waits for, start-up included) and, with --official, the official offline analysis in
memory over the same traces (bench.official_offline; Python lists built outside the timing). Printed per
variant: median wall seconds [min-max], median CPU seconds (the child's user + system), and the ratio of the
official median to the variant's median (both over the same tokens). The load average is printed at start
and end. The SYNTHETIC pool (bench.synthetic_pool, top-20 kept, with its confidence blocks) is kept under --cache
between runs; a tree that predates the blocks reads the logs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

from bench import official_offline
from bench.measure import Run, interleaved, run_process, stage_env, timed
from bench.synthetic_pool import PoolShape, Workspace, bench_params, write_workspace
from tracevote.store.pool import Pool


def workspace_at(cache: Path, shape: PoolShape, window: int) -> Workspace:
    folder = cache / f"{shape.problems}x{shape.traces}x{shape.mean_tokens}w{window}"
    if not (folder / "done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        params = bench_params()
        params["confidence"].update(group_size=window, tail_tokens=window)
        write_workspace(folder, shape, params, workers=2)
        (folder / "done").touch()
    pool_root = next((folder / "pools" / "bench").iterdir())
    ids = tuple(Pool(pool_root).problem_ids())
    return Workspace(folder, folder / "params.yaml", folder / "data" / "bench.jsonl", folder / "pools" / "bench.json",
                     pool_root, ids)


def run_variant(workspace: Workspace, tree: Path, workers: int) -> Run:
    """Wall and CPU seconds of `tree`'s stages/score.py over the whole pool."""
    out = workspace.folder / "out" / f"{tree.name}-{workers}.parquet"
    out.parent.mkdir(exist_ok=True)
    command = [sys.executable, str(tree / "stages" / "score.py"), "--params", str(workspace.params),
               "--problems", str(workspace.problems), "--manifest", str(workspace.manifest), "--out", str(out),
               "--stops", str(out.with_suffix(".stops.parquet"))]
    env = stage_env(TRACEVOTE_WORKERS=str(workers), PYTHONPATH=str(tree / "src"))
    return run_process(command, workspace.folder, env)


def official_inputs(workspace: Workspace, n_pool: int) -> list[list[float]]:
    """Each trace's C_i as the Python list of float64 the official analysis holds (every trace has an answer)."""
    pool = Pool(workspace.pool_root)
    lists = []
    for problem_id in workspace.problem_ids:
        traces = pool.read_problem(problem_id, n_pool)
        values = np.asarray(traces.token_confidence, dtype=np.float64)
        lists += [values[a:b].tolist() for a, b in zip(traces.offsets[:-1], traces.offsets[1:], strict=True)]
    return lists


def run_official(lists: list[list[float]], window: int) -> Run:
    return timed(lambda: [official_offline.trace_measures(confs, window, 0.1, window) for confs in lists])


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.3f} [{min(values):.3f}-{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--traces", type=int, default=96)
    parser.add_argument("--tokens", type=int, default=3300)
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], help="name=path of a source tree (repeatable)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1])
    parser.add_argument("--official", action="store_true")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tracevote-score-bench"))
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.tree) or {"here": "."}
    shape = PoolShape(args.problems, args.traces, args.tokens, 20)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    workspace = workspace_at(args.cache, shape, args.window)
    variants = {f"{name} w{w}": (Path(path).resolve(), w) for name, path in trees.items() for w in args.workers}
    lists = official_inputs(workspace, shape.traces) if args.official else []
    tokens = sum(map(len, lists)) if lists else None
    sides: dict[str, Callable[[], Run]] = {
        name: (lambda tree=tree, workers=workers: run_variant(workspace, tree, workers))
        for name, (tree, workers) in variants.items()}
    for tree, workers in variants.values():  # warm-up: bytecode and page cache
        run_variant(workspace, tree, workers)
    if lists:
        sides["official"] = lambda: run_official(lists, args.window)
    runs = interleaved(sides, args.repeats)
    walls = {name: [run.wall for run in side_runs] for name, side_runs in runs.items()}
    cpus = {name: [run.cpu for run in side_runs] for name, side_runs in runs.items()}
    counted = f" ({tokens:,} tokens)" if tokens else ""
    print(f"{args.problems} x {args.traces} traces x ~{args.tokens} tokens{counted}, {args.repeats} interleaved runs")
    official = statistics.median(walls["official"]) if lists else None
    for name in walls:
        ratio = f"  official/this {official / statistics.median(walls[name]):5.2f}x" if official else ""
        print(f"{name:>14}: wall {summary(walls[name])} s  cpu {summary(cpus[name])} s{ratio}")
    print(f"load average at end: {os.getloadavg()}")
    print(orjson.dumps({"walls": walls, "cpus": cpus}).decode())


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
