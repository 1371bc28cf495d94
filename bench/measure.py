"""How every benchmark times things: whole runs with wall and CPU seconds, interleaved repetitions, spreads.

- `Run`: one timed run, wall seconds and CPU seconds (this process's user + system time, plus that of the
  children it waited for: `resource.getrusage(RUSAGE_CHILDREN)`, so a subprocess's CPU is counted).
- `interleaved`: sides A, B, ... run as A, B, A, B, ... so load from other jobs hits every side alike;
  each side gets the same number of runs, and every figure is their median with min and max.
- `fit_rate`: the marginal rate of a side from a least-squares line of seconds against size over
  several sizes (start-up is the intercept), never the difference of two runs.
"""

from __future__ import annotations

import ctypes
import gc
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    output: str = field(default="", compare=False)  # a process's stdout


@dataclass(frozen=True)
class Spread:
    """Median, min and max of a figure's repetitions: `Spread.of([3, 1, 2])` is Spread(2, 1, 3, 3)."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("a spread of no values")
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))

    def show(self, fmt: str = ",.3g") -> str:
        return f"{self.median:{fmt}} [{self.low:{fmt}}–{self.high:{fmt}}]"


def cpu_seconds() -> float:
    """User + system seconds of this process and of every child it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(work: Callable[[], object]) -> Run:
    """Wall and CPU seconds of `work()` run here (children it starts and waits for included)."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    work()
    return Run(time.perf_counter() - wall, cpu_seconds() - cpu)


def run_process(command: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, *,
                orphans: bool = False) -> Run:
    """Wall and CPU seconds of a whole process, as a user starts it; its output is kept for a failure. With
    `orphans`, CPU also counts the processes it leaves behind (a multiprocessing fork server its parent never
    waits for): this process adopts them and waits for every child before reading RUSAGE_CHILDREN, so it must
    have no other child running."""
    if orphans:
        adopt_orphans()
    wall, cpu = time.perf_counter(), cpu_seconds()
    done = subprocess.run(list(command), cwd=cwd, env=None if env is None else dict(env), capture_output=True,
                          text=True)
    wall = time.perf_counter() - wall
    if orphans:
        reap_orphans()
    run = Run(wall, cpu_seconds() - cpu, done.stdout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} (in {cwd}) exited {done.returncode}:\n{done.stderr[-3000:]}")
    return run


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def adopt_orphans() -> None:
    """Make this process the reaper of its descendants' orphans (Linux; elsewhere a no-op, and orphans' CPU goes
    uncounted), so that RUSAGE_CHILDREN counts every process a command started."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    """Wait for every adopted orphan to end (a fork server ends once its parent has)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def interleaved(sides: Mapping[str, Callable[[], Run]], repeats: int) -> dict[str, list[Run]]:
    """`repeats` runs of each side, in the order A, B, A, B, ...; each starts with the garbage collector's
    generations empty, so no side pays for a full collection the one before it made due (one over a process
    holding numba's objects costs ~65 ms)."""
    runs: dict[str, list[Run]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, side in sides.items():
            gc.collect()
            runs[name].append(side())
    return runs


def fit_rate(sizes: Sequence[float], seconds: Sequence[float]) -> float:
    """Units per second from the slope of a least-squares line through (size, seconds):
    fit_rate([1, 2, 3], [1.5, 2.5, 3.5]) == 1.0 (the 0.5 s intercept is start-up)."""
    if len(set(sizes)) < 2:
        raise ValueError("a rate needs at least two sizes")
    slope = float(np.polyfit(np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float), 1)[0])
    return 1.0 / slope if slope > 0 else float("inf")


def load_average() -> float:
    """The machine's 1-minute load average (runnable processes, all users)."""
    return os.getloadavg()[0]


def walls(runs: Sequence[Run]) -> Spread:
    return Spread.of([run.wall for run in runs])


def cpus(runs: Sequence[Run]) -> Spread:
    return Spread.of([run.cpu for run in runs])


def stage_env(**extra: str) -> dict[str, str]:
    """The environment a user's process runs in: bytecode read from where the install wrote it (`make setup`
    compiles the libraries, `make test` our code) and written there when stale, even where
    PYTHONDONTWRITEBYTECODE is set (some sandboxes and CI images set it, which adds ~2 s of compiling to every
    start). No PYTHONPYCACHEPREFIX: Python then reads bytecode only under that prefix, so every process would
    compile pandas, pyarrow and matplotlib again (~1 CPU s a stage at the first run)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    return {**env, **extra}
