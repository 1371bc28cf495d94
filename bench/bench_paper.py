"""Benchmark (--paper only): paper scale MEASURED, not projected: score, aggregate and report on a
30 x 4096 traces x ~3,000 tokens pool on disk (~368 M tokens), as DVC runs them.

Set-up, outside the timing: bench.synthetic_pool writes the pool (confidence only, as with
pool.keep_top_logprobs: false: top-20 would need ~16 GB) in two processes, with the normalized problems
file, params.yaml (the committed defaults: group_size 2048, K = 1, 2, 4, ..., 512 drawn from the 4096
traces as the paper does, 64 repeats, 1,000 bootstrap resamples, online DeepConf low and high) and the
manifest. Free disk is checked first; too little is refused before anything is written.

After one untimed warm-up pass (none at --quick scale), timed, whole processes (wall and CPU seconds, process +
children), in rounds of cold then warm:
- cold: before each stage, every file it reads that the benchmark wrote (the pool's logs; the score and
  stop tables; the aggregate) is dropped from the page cache with posix_fadvise(POSIX_FADV_DONTNEED) on
  Linux, which needs no root; Python, the libraries and the stage scripts stay cached;
- warm: the same three stages again at once, their inputs in the page cache.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Figure
from bench.measure import Run, run_process, stage_env
from bench.synthetic_pool import ROOT, PoolShape, Workspace, bench_params, draw_problem, samples, write_workspace
from tracevote.store import codec

STAGES = ("score", "aggregate", "report")
HEADROOM = 1 << 30  # bytes beyond the pool: tables, plots, pycache


@dataclass(frozen=True)
class Scale:
    shape: PoolShape
    repeats: int
    warm_up: bool = True  # an untimed pass first; quick scale (the suite's smoke run) times nothing worth steadying


SCALES = {"full": Scale(PoolShape(30, 4096, 3000, 0), 3),
          "quick": Scale(PoolShape(2, 32, 300, 0), 1, warm_up=False)}


def estimated_bytes(shape: PoolShape) -> int:
    """The pool's size on disk, from bytes/token of 16 traces encoded in memory times the expected tokens."""
    probe = PoolShape(1, 16, shape.mean_tokens, shape.top_k)
    draw = draw_problem(0, probe)
    per_token = sum(len(codec.encode(s)) for s in samples("probe", draw)) / int(draw.offsets[-1])
    mean_length = shape.mean_tokens * math.exp(0.35**2 / 2)  # a log-normal's mean, sigma 0.35
    return int(per_token * mean_length * shape.problems * shape.traces)


def check_disk(folder: Path, shape: PoolShape) -> int:
    """The estimated pool size; SystemExit naming the folder when it lacks room for it."""
    need, free = estimated_bytes(shape) + HEADROOM, shutil.disk_usage(folder).free
    if free < need:
        raise SystemExit(f"bench_paper refused: paper scale needs ~{need / 2**30:.1f} GiB in {folder} "
                         f"(set TMPDIR to move it), only {free / 2**30:.1f} GiB free; nothing was written")
    return need - HEADROOM


def commands(workspace: Workspace) -> dict[str, list[str]]:
    """dvc.yaml's score, aggregate and report commands for the dataset `bench`, run from the workspace."""
    params = ["--params", str(workspace.params)]
    return {
        "score": [sys.executable, str(ROOT / "stages" / "score.py"), *params, "--problems", "data/bench.jsonl",
                  "--manifest", "pools/bench.json", "--out", "data/scores/bench.parquet",
                  "--stops", "data/scores/bench.stops.parquet"],
        "aggregate": [sys.executable, str(ROOT / "stages" / "aggregate.py"), *params,
                      "--scores", "data/scores/bench.parquet", "--stops", "data/scores/bench.stops.parquet",
                      "--out", "data/aggregate/bench.json"],
        "report": [sys.executable, str(ROOT / "stages" / "report.py"), *params, "--aggregate",
                   "data/aggregate/bench.json", "--scores", "data/scores/bench.parquet", "--problems",
                   "data/bench.jsonl", "--metrics", "metrics/deepconf/bench",
                   "--headline", "metrics/headline/deepconf/bench", "--plots", "plots/deepconf/bench"],
    }


def inputs(workspace: Workspace, stage: str) -> list[Path]:
    """The benchmark-written files `stage` reads."""
    folder = workspace.folder
    if stage == "score":
        return sorted(workspace.pool_root.rglob("*.tvf"))
    tables = [folder / "data" / "scores" / "bench.parquet", folder / "data" / "scores" / "bench.stops.parquet"]
    return tables if stage == "aggregate" else [folder / "data" / "aggregate" / "bench.json", tables[0]]


def drop_page_cache(paths: Iterable[Path]) -> None:
    """Evict the files' pages (written back first); Linux honours POSIX_FADV_DONTNEED without root."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def one_pass(workspace: Workspace, cold: bool) -> dict[str, Run]:
    env = stage_env()
    runs = {}
    for stage, command in commands(workspace).items():
        if cold:
            drop_page_cache(inputs(workspace, stage))
        runs[stage] = run_process(command, workspace.folder, env)
    return runs


def run(scale: str = "full") -> list[dict]:
    size = SCALES[scale]
    if not hasattr(os, "posix_fadvise"):
        raise SystemExit("bench_paper refused: the cold figure needs os.posix_fadvise (Linux)")
    folder = Path(tempfile.mkdtemp(prefix="tracevote-bench-paper-"))
    try:
        estimate = check_disk(folder, size.shape)
        started = time.perf_counter()
        workspace = write_workspace(folder / "w", size.shape, paper_params(), workers=2)
        written = time.perf_counter() - started
        pool_bytes = sum(path.stat().st_size for path in inputs(workspace, "score"))
        if size.warm_up:
            one_pass(workspace, cold=False)  # untimed: bytecode compiled, every output there once
        rounds = [(one_pass(workspace, cold=True), one_pass(workspace, cold=False)) for _ in range(size.repeats)]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return [figure.to_json() for figure in figures(size, rounds, written, pool_bytes, estimate)]


def paper_params() -> dict:
    params = bench_params()
    params["eval"].update(repeat=64, bootstrap=1000)
    params["online"].update(warmup=16)
    return params


def figures(size: Scale, rounds: list[tuple[dict[str, Run], dict[str, Run]]], written: float, pool_bytes: int,
            estimate: int) -> list[Figure]:
    shape = size.shape
    what = f"{shape.problems} x {shape.traces} traces x ~{shape.mean_tokens:,} tokens, {size.repeats} rounds"
    result = []
    for label, parts in (*((stage, (stage,)) for stage in STAGES), ("score + aggregate + report", STAGES)):
        for temperature, index in (("warm", 1), ("cold", 0)):
            walls = [sum(r[index][p].wall for p in parts) for r in rounds]
            cpus = [sum(r[index][p].cpu for p in parts) for r in rounds]
            result.append(Figure(f"paper scale: {label}, {temperature}", "s", walls, cpu=cpus,
                                 note=f"{what}; {COLD_NOTE if temperature == 'cold' else WARM_NOTE}"))
    result.append(Figure("paper scale: pool on disk", "GB", [pool_bytes / 1e9],
                         note=f"confidence only; estimated {estimate / 1e9:.2f} GB before writing"))
    result.append(Figure("paper scale: writing the synthetic pool (set-up, 2 processes)", "s", [written]))
    return result


WARM_NOTE = "inputs in the page cache (the run right after a cold one)"
COLD_NOTE = "inputs dropped from the page cache before each stage (posix_fadvise DONTNEED, no root)"
