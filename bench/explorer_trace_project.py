"""A DeepConf project with a real pool, for the trace pages' tests and benchmark: the simulated model's traces
(SIMULATED) built by build_pool (the alternatives' strings kept), scored and aggregated by the stages' own scripts,
and a live online run of the same dataset (build_online); no DVC."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tracevote.cli.demo import BUILTIN_PROBLEMS, local_dataset
from tracevote.cli.demo_params import deep_merge
from tracevote.core.config import Params, load_params
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.problems import normalize_rows
from tracevote.store.pool import Pool, read_manifest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_PARAMS = ROOT / "tests" / "fixtures" / "params.yaml"
DATASET = "toy"
STAGE_TIMEOUT_S = 1800


@dataclass(frozen=True)
class TraceShape:
    """The project's size: the tests' is small (short traces, top-5, a window of 24 tokens)."""

    problems: int = 2
    traces: int = 16
    mean_tokens: int = 90
    max_tokens: int = 200
    top_logprobs: int = 5
    group_size: int = 24
    warmup: int = 4
    report_k: int = 8
    live_budget: int | None = 8  # None: no live run


PROBLEMS, TRACES, GROUP = TraceShape.problems, TraceShape.traces, TraceShape.group_size
# one problem's chunk of 64 traces as at paper scale: ~3,000 tokens a trace, top-20, windows of 2,048
PAPER_CHUNK = TraceShape(problems=1, traces=64, mean_tokens=3000, max_tokens=4096, top_logprobs=20, group_size=2048,
                         warmup=16, report_k=16, live_budget=None)


@dataclass(frozen=True)
class PoolProject:
    root: Path
    params: Params

    @property
    def pool(self) -> Pool:
        manifest = self.root / "pools" / f"{DATASET}.json"
        return Pool(read_manifest(manifest).pool_root(manifest))


def overrides(root: Path, shape: TraceShape) -> dict[str, Any]:
    live = ({"datasets": [DATASET], "methods": ["low"], "budget": shape.live_budget, "concurrency": 4}
            if shape.live_budget else {"datasets": []})
    return {"datasets": {DATASET: local_dataset(root / "data" / f"{DATASET}.jsonl")},
            "deepconf": {"datasets": [DATASET]},
            "model": {"backend": "sim", "sim": {"seed": 3, "signal": 1.0, "accuracy": 0.5,
                                                "mean_tokens": shape.mean_tokens}},
            "decoding": {"max_tokens": shape.max_tokens, "top_logprobs": shape.top_logprobs},
            "pool": {"n_pool": shape.traces, "concurrency": 4, "keep_top_tokens": True},
            "confidence": {"group_size": shape.group_size, "tail_tokens": shape.group_size},
            "eval": {"k": sorted({1, shape.report_k, shape.traces}), "repeat": 8, "bootstrap": 100},
            "report": {"k": shape.report_k},
            "online": {"warmup": shape.warmup, "percentiles": {"low": 90, "high": 10}, "live": live}}


StageRunner = Callable[[Path, str, list[str], dict[str, str]], None]  # (folder, stage, its arguments, env added)


def run_stage_process(root: Path, stage: str, args: list[str], env: dict[str, str]) -> None:
    """stages/<stage>.py run as DVC runs it, in `root`, every *_API_KEY unset and `env` added."""
    full_env = {**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}, **env}
    done = subprocess.run([sys.executable, str(ROOT / "stages" / f"{stage}.py"), *args], cwd=root, env=full_env,
                          capture_output=True, text=True, timeout=STAGE_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{stage} exited {done.returncode}: {done.stderr[-2000:]}")


def build_project(root: Path, shape: TraceShape = TraceShape(),
                  run_stage: StageRunner = run_stage_process) -> PoolProject:
    """params.yaml, the problems, then build_pool, score, aggregate (and build_online) as their stages run them
    (`run_stage`: by default each a process of its own; the tests run them in their own process)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    base = load_params(FIXTURE_PARAMS)
    rows = read_local_rows(BUILTIN_PROBLEMS)[:shape.problems]
    write_jsonl(root / "data" / f"{DATASET}.jsonl",
                (p.to_record() for p in normalize_rows(rows, base.dataset("aime_2025"), "demo")))
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), overrides(root, shape))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    problems, manifest = f"data/{DATASET}.jsonl", f"pools/{DATASET}.json"
    scores, stops = f"data/scores/{DATASET}.parquet", f"data/scores/{DATASET}.stops.parquet"
    stages = [("build_pool", "--dataset", DATASET, "--problems", problems, "--pools", f"pools/{DATASET}",
               "--manifest", manifest),
              ("score", "--problems", problems, "--manifest", manifest, "--out", scores, "--stops", stops),
              ("aggregate", "--scores", scores, "--stops", stops, "--out", f"data/aggregate/{DATASET}.json")]
    if shape.live_budget:
        stages.append(("build_online", "--dataset", DATASET, "--problems", problems, "--online", f"online/{DATASET}",
                       "--manifest", f"online/{DATASET}.json"))
    for stage, *args in stages:
        run_stage(root, stage, args, {"TRACEVOTE_WORKERS": "1"})
    return PoolProject(root, load_params(root / "params.yaml"))
