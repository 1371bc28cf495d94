"""`make real`: every method on a real model, the shipped tinymath model served by llama.cpp's server on loopback.

A scratch DVC project (`real/`, ignored by git and DVC, rebuilt each run like `make demo`'s) gets this repository's
pipeline and a params.yaml whose every method calls one named endpoint, `tinymath` (profile llama-cpp-python, no
key, no price), at the server's address: the DeepConf pool on the held-out problems, score, aggregate and report;
online DeepConf run live on the same problems and seeds (the pool's traces are its traces in full); a short
debate; critiques of the model's own solutions, labelled by the generator; grading of the pool's traces with
Math-Verify and the critic. The server runs only while `dvc repro` does.

The server's port is held by this process from before the server starts (tracevote.engine.loopback), and `dvc`
runs in a session of its own, watched: if the server exits, the stage is stopped and the run ends in one line.
SIGHUP, SIGTERM and SIGINT stop `dvc` (its stage first, then dvc; the whole group, waited for) and then the
server (its whole group), and the command exits with 128 + the signal's number: nothing it started outlives it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tracevote.cli.demo import clear_scratch, copy_pipeline, repro_targets, results_listing
from tracevote.core.errors import DataError
from tracevote.core.params_yaml import read_params_yaml
from tracevote.engine.llamacpp import EngineServer, llamacpp_server
from tracevote.engine.loopback import log_tail
from tracevote.engine.processes import Stopped, own_group, stopped_by_signals

MODEL = Path("models") / "tinymath.gguf"
DATASET = "tinymath"
ENDPOINT = "tinymath"
PROBLEMS_FILE = Path("inputs") / "tinymath.jsonl"  # the first --problems held-out problems, in the scratch project
SERVER_CONTEXT = 2048  # the debate's later rounds quote other agents: far past the model's 128 trained positions
OWN_SOLUTIONS = "tinymath_own"  # the pool's own traces cut into steps, labelled by the generator (source.pool)
PER_PROBLEM = 4  # solutions critiqued per problem, half right and half wrong where the pool has both
K_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
WATCH_S = 0.5  # how often the server is checked for life while dvc runs

# the engine's log file -> the running engine, stopped on leaving (llamacpp_engine's by default)
EngineLauncher = Callable[[Path], contextlib.AbstractContextManager[EngineServer]]


@dataclass(frozen=True)
class RealRun:
    problems: int  # held-out problems in the pool (the first ones of the file)
    traces: int  # traces per problem
    debates: int  # problems debated
    method: str | None  # a key of cli.demo.METHOD_TARGETS, or None: every stage

    def check(self) -> None:
        """A DataError naming each flag out of range, and only those, with its value and what would fit."""
        problems_fit = 1 <= self.problems <= 100
        most_debates = self.problems if problems_fit else 100  # a wrong --problems is blamed, not --debates
        wrong = [*([f"--problems {self.problems} (1-100)"] if not problems_fit else []),
                 *([f"--traces {self.traces} (>= 1)"] if self.traces < 1 else []),
                 *([f"--debates {self.debates} (1 to --problems {self.problems})"]
                   if not 1 <= self.debates <= most_debates else [])]
        if wrong:
            raise DataError(f"real: {' and '.join(wrong)}: out of range")


def real_overrides(params: dict[str, Any], run: RealRun, base_url: str) -> dict[str, Any]:
    """params.yaml changes: one dataset (the held-out file's first problems), one endpoint for every method, the
    pool's sizes, and confidence windows for traces of ~50 tokens (the paper's 2048 would hold a whole trace), every
    token signal compared in the AUROC table (confidence.compare_signals: a pool this small scores in a second)."""
    recipe = params["datasets"][DATASET]
    source = {**recipe["source"], "hf_dataset": None, "path": str(PROBLEMS_FILE), "watch": str(PROBLEMS_FILE)}
    ks = [k for k in K_LADDER if k < run.traces] + [run.traces]
    return {
        "datasets": {DATASET: {**recipe, "source": source}, OWN_SOLUTIONS: own_solutions(recipe)},
        "endpoints": {ENDPOINT: endpoint(base_url)},
        "model": {"backend": "openai"},
        "deepconf": {"datasets": [DATASET], "endpoint": ENDPOINT},
        "decoding": {"temperature": 0.6, "top_p": None, "max_tokens": 256, "top_logprobs": 20, "seed": 0},
        "pool": {"n_pool": run.traces, "concurrency": 2, "max_cost_usd": 0.0},
        "confidence": {"group_size": 16, "tail_tokens": 16, "compare_signals": True},
        "eval": {"k": ks},
        "online": {"warmup": min(16, run.traces),
                   "live": {"datasets": [DATASET], "methods": ["low", "high"], "budget": run.traces, "concurrency": 2,
                            "max_cost_usd": 0.0}},
        "report": {"k": run.traces},
        "debate": {"datasets": [DATASET], "contest_halves": [], "agents": 3, "rounds": 2, "max_tokens": 256,
                   "temperature": 0.6, "system": None, "examples": None,
                   "question": params["prompt"]["template"], "concurrency": 2, "max_cost_usd": 0.0,
                   "endpoint": ENDPOINT, "judge_endpoint": ENDPOINT, "problems": [0, run.debates - 1]},
        "critique": {"datasets": [OWN_SOLUTIONS], "endpoint": ENDPOINT, "n_votes": 2, "max_tokens": 128,
                     "concurrency": 2, "max_cost_usd": 0.0},
        "grading": {"runs": {f"pool_{DATASET}": {"dataset": DATASET, "predictions": f"pools/{DATASET}.json",
                                                 "id_key": None}},
                    "critic": {"enabled": True, "endpoint": ENDPOINT, "temperature": 0.6, "max_tokens": 64,
                               "max_samples": 20, "concurrency": 2, "max_cost_usd": 0.0}},
    }


def own_solutions(recipe: dict[str, Any]) -> dict[str, Any]:
    """The steps dataset of the pool's own traces (docs/methods/critique.md: a model's own solutions)."""
    source = {**recipe["source"], "hf_dataset": None, "path": None, "pool": DATASET,
              "watch": f"pools/{DATASET}.json", "per_problem": PER_PROBLEM, "sample_seed": 0}
    return {"source": source, "kind": "steps", "problem_key": "problem", "answer_key": "label", "id_key": "id",
            "answer_format": "integer"}


def endpoint(base_url: str) -> dict[str, Any]:
    """The named endpoint of the launched server: profile llama-cpp-python, no key, free."""
    return {"profile": "llama-cpp-python", "base_url": base_url, "name": "tinymath", "extra_body": {},
            "reasoning_effort": None, "api_key_env": "TINYMATH_API_KEY", "needs_key": False,
            "pricing": {"checked": "2026-11", "input_cache_miss": 0.0, "input_cache_hit": 0.0, "output": 0.0}}


def prepare(repo: Path, scratch: Path, run: RealRun, server: EngineServer) -> None:
    """A fresh scratch project for `run` against `server`."""
    params = read_params_yaml(repo / "params.yaml")
    held_out = repo / params["datasets"][DATASET]["source"]["path"]
    rows = held_out.read_text(encoding="utf-8").splitlines()[: run.problems]
    clear_scratch(scratch)
    copy_pipeline(repo, scratch, repo / "params.yaml", real_overrides(params, run, server.base_url))
    (scratch / PROBLEMS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (scratch / PROBLEMS_FILE).write_text("\n".join(rows) + "\n", encoding="utf-8")


def llamacpp_engine(repo: Path) -> EngineLauncher:
    """The engine `make real` runs: llama.cpp's server on the shipped model, counting the tokens it generates."""
    return lambda log: llamacpp_server(repo / MODEL, log=log, model_alias=ENDPOINT, n_ctx=SERVER_CONTEXT,
                                       count_tokens=True)


def run_real(repo: Path, scratch: Path, run: RealRun, engine: EngineLauncher | None = None) -> int:
    """Start the server, build and run the scratch project, stop the server; dvc's exit code, or 128 + the number
    of the signal that stopped the run."""
    launch = engine or llamacpp_engine(repo)
    try:
        with stopped_by_signals():
            failed = run_with_engine(repo, scratch, run, launch)
    except Stopped as stopped:
        say(f"real: stopped by {stopped.name}: " + ", then ".join(stopped.stopped or ["nothing was running"]),
            stream=sys.stderr)
        return 128 + stopped.signum
    if failed:
        return failed
    say("real: the server is stopped\n" + results_listing(scratch, DATASET, repo, label="real", method=run.method,
                                                          live=True))
    return 0


def run_with_engine(repo: Path, scratch: Path, run: RealRun, launch: EngineLauncher) -> int:
    try:
        with launch(scratch.parent / "real-engine.log") as server:
            try:
                say(f"real: {server.name} on {server.base_url} (pid {server.pid}) serving {MODEL}; "
                    f"{run.problems} problems x {run.traces} traces in the scratch project {scratch}")
                prepare(repo, scratch, run, server)
                return run_dvc_watched(scratch, [["init", "--no-scm", "-q"], ["repro", *repro_targets(run.method)]],
                                       server)
            except Stopped as stopped:
                stopped.stopped.append(f"{server.name} (pid {server.pid}) stopped")
                raise
    except Stopped as stopped:
        if not stopped.stopped:
            stopped.stopped.append("the server (still starting) stopped")
        raise


def run_dvc_watched(scratch: Path, commands: list[list[str]], server: EngineServer) -> int:
    """Each `dvc` command in the scratch project, in a session of its own, while `server` lives; 0, or the first
    failure's exit code, said in one line. Whatever ends the wait, the command's whole group is stopped before
    this returns (the caller stops the server after)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in commands:
        shown = f"`dvc {' '.join(command)}`"
        with own_group([sys.executable, "-m", "dvc", *command], cwd=scratch, env=env) as process:
            try:
                code = wait_watching(process, server, shown)
            except Stopped as stopped:
                stopped.stopped.append(f"{shown} (pid {process.pid}) stopped")
                raise
        if code != 0:
            print(f"real: {shown} failed in {scratch}", file=sys.stderr)
            return code
    return 0


def wait_watching(process: subprocess.Popen[bytes], server: EngineServer, shown: str) -> int:
    """`process`'s exit code; DataError as soon as the server has exited (or if it had when `process` failed), so
    no request goes elsewhere and no failure is blamed on the wrong cause."""
    while True:
        try:
            code = process.wait(timeout=WATCH_S)
        except subprocess.TimeoutExpired:
            code = None
        engine_code = server.exit_code()
        if engine_code is not None and code != 0:
            raise DataError(f"real: {server.name} (pid {server.pid}) exited with code {engine_code} while {shown} "
                            f"(pid {process.pid}) ran; it is stopped and the run ends here; the end of the server's "
                            f"log ({server.log}):\n{log_tail(server.log)}")
        if code is not None:
            return code


def say(text: str, stream: TextIO | None = None) -> None:
    """Print, where a closed terminal (SIGHUP) makes writing fail: the run's outcome is its exit code."""
    with contextlib.suppress(OSError):
        print(text, file=stream or sys.stdout, flush=True)
