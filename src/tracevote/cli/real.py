"""`make real`: every method on a real model, the shipped tinymath model served by llama.cpp's server on loopback.

A scratch DVC project (`real/`, ignored by git and DVC, rebuilt each run like `make demo`'s) gets this repository's
pipeline and a params.yaml whose every method calls one named endpoint, `tinymath` (profile llama-cpp-python, no
key, no price), at the server's address: the DeepConf pool on the held-out problems, score, aggregate and report;
online DeepConf run live on the same problems and seeds (the pool's traces are its traces in full); a short
debate; critiques of the model's own solutions, labelled by the generator; grading of the pool's traces with
Math-Verify and the critic. The server runs only while `dvc repro` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tracevote.cli.demo import clear_scratch, copy_pipeline, repro_targets, results_listing, run_dvc
from tracevote.core.errors import DataError
from tracevote.engine.llamacpp import EngineServer, llamacpp_server, stop_on_sigterm

MODEL = Path("models") / "tinymath.gguf"
DATASET = "tinymath"
ENDPOINT = "tinymath"
PROBLEMS_FILE = Path("inputs") / "tinymath.jsonl"  # the first --problems held-out problems, in the scratch project
SERVER_CONTEXT = 2048  # the debate's later rounds quote other agents: far past the model's 128 trained positions
OWN_SOLUTIONS = "tinymath_own"  # the pool's own traces cut into steps, labelled by the generator (source.pool)
PER_PROBLEM = 4  # solutions critiqued per problem, half right and half wrong where the pool has both
K_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


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
    pool's sizes, and confidence windows for traces of ~50 tokens (the paper's 2048 would hold a whole trace)."""
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
        "confidence": {"group_size": 16, "tail_tokens": 16},
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
    params = yaml.safe_load((repo / "params.yaml").read_text(encoding="utf-8"))
    held_out = repo / params["datasets"][DATASET]["source"]["path"]
    rows = held_out.read_text(encoding="utf-8").splitlines()[: run.problems]
    clear_scratch(scratch)
    copy_pipeline(repo, scratch, repo / "params.yaml", real_overrides(params, run, server.base_url))
    (scratch / PROBLEMS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (scratch / PROBLEMS_FILE).write_text("\n".join(rows) + "\n", encoding="utf-8")


def run_real(repo: Path, scratch: Path, run: RealRun) -> int:
    """Start the server, build and run the scratch project, stop the server; dvc's exit code."""
    with stop_on_sigterm(), llamacpp_server(repo / MODEL, log=scratch.parent / "real-engine.log",
                                            model_alias="tinymath", n_ctx=SERVER_CONTEXT, count_tokens=True) as server:
        print(f"real: llama.cpp's server on {server.base_url} (pid {server.pid}) serving {MODEL}; "
              f"{run.problems} problems x {run.traces} traces in the scratch project {scratch}")
        prepare(repo, scratch, run, server)
        failed = run_dvc(scratch, [["init", "--no-scm", "-q"], ["repro", *repro_targets(run.method)]], "real")
        if failed:
            return failed
    print("real: the server is stopped\n" + results_listing(scratch, DATASET, repo, label="real", method=run.method,
                                                                live=True))
    return 0
