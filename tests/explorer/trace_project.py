"""A small DeepConf project with a real pool for the trace pages' tests: the simulated model's traces built by
build_pool (alternatives' strings kept), scored and aggregated by the stages' own scripts (no DVC), and a live
online run of the same dataset (build_online)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s
from tests.dvcproject import deep_merge, one_dataset, project_env
from tracevote.cli.demo import BUILTIN_PROBLEMS
from tracevote.core.config import Params, load_params
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.problems import normalize_rows
from tracevote.store.pool import Pool, read_manifest

DATASET, PROBLEMS, TRACES, GROUP = "toy", 2, 16, 24


@dataclass(frozen=True)
class PoolProject:
    root: Path
    params: Params

    @property
    def pool(self) -> Pool:
        manifest = self.root / "pools" / f"{DATASET}.json"
        return Pool(read_manifest(manifest).pool_root(manifest))


def overrides(root: Path) -> dict:
    return {**one_dataset(DATASET, root / "data" / f"{DATASET}.jsonl"),
            "model": {"backend": "sim", "sim": {"seed": 3, "signal": 1.0, "accuracy": 0.5, "mean_tokens": 90}},
            "decoding": {"max_tokens": 200, "top_logprobs": 5},
            "pool": {"n_pool": TRACES, "concurrency": 4, "keep_top_tokens": True},
            "confidence": {"group_size": GROUP, "tail_tokens": GROUP},
            "eval": {"k": [1, 8, TRACES], "repeat": 8, "bootstrap": 100},
            "report": {"k": 8},
            "online": {"warmup": 4, "percentiles": {"low": 90, "high": 10},
                       "live": {"datasets": [DATASET], "methods": ["low"], "budget": 8, "concurrency": 4}}}


def build_project(root: Path) -> PoolProject:
    """params.yaml, the problems, then build_pool, score and aggregate as their stages run them."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    base = load_params(FIXTURE_PARAMS)
    rows = read_local_rows(BUILTIN_PROBLEMS)[:PROBLEMS]
    write_jsonl(root / "data" / f"{DATASET}.jsonl",
                (p.to_record() for p in normalize_rows(rows, base.dataset("aime_2025"), "demo")))
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), overrides(root))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    problems, manifest = f"data/{DATASET}.jsonl", f"pools/{DATASET}.json"
    scores, stops = f"data/scores/{DATASET}.parquet", f"data/scores/{DATASET}.stops.parquet"
    for stage, *args in (
            ("build_pool", "--dataset", DATASET, "--problems", problems, "--pools", f"pools/{DATASET}",
             "--manifest", manifest),
            ("score", "--problems", problems, "--manifest", manifest, "--out", scores, "--stops", stops),
            ("aggregate", "--scores", scores, "--stops", stops, "--out", f"data/aggregate/{DATASET}.json"),
            ("build_online", "--dataset", DATASET, "--problems", problems, "--online", f"online/{DATASET}",
             "--manifest", f"online/{DATASET}.json")):
        done = subprocess.run([sys.executable, str(REPO_ROOT / "stages" / f"{stage}.py"), *args], cwd=root,
                              env=project_env({"TRACEVOTE_WORKERS": "1"}), capture_output=True, text=True,
                              timeout=hang_guard_s())
        assert done.returncode == 0, f"{stage}: {done.stderr}"
    return PoolProject(root, load_params(root / "params.yaml"))
