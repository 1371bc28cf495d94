"""The study report in a real DVC project on the simulator: two models of different accuracy and price, each built by
its own stages, then study@toy; `dvc metrics show` lists a headline per (model, method), and a price change re-runs
only the study, its dollars showing in `dvc metrics diff` (prices make no trace, so no pool is rebuilt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.dvcproject import dvc, make_project, run, update_params
from tests.test_pipeline import ran_stages, small_sim_params

pytestmark = pytest.mark.slow

CHEAP = {"profile": "deepseek", "base_url": "http://127.0.0.1:9", "name": "cheap-model", "extra_body": {},
         "reasoning_effort": None, "api_key_env": "DEEPSEEK_API_KEY", "needs_key": False, "sim": {"accuracy": 0.2},
         "pricing": {"checked": "2026-07", "input_cache_miss": 0.05, "input_cache_hit": 0.01, "output": 0.1}}


def test_two_models_in_one_table_and_a_price_change_reruns_only_the_study(tmp_path: Path) -> None:
    problems = tmp_path / "problems.jsonl"
    lines = (Path(small_sim_params()["datasets"]["toy"]["source"]["path"])).read_text().splitlines()[:4]
    problems.write_text("\n".join(lines) + "\n")
    params = small_sim_params(problems)
    params |= {"pool": {"n_pool": 4, "concurrency": 4}, "eval": {"k": [1, 4], "repeat": 4, "bootstrap": 100},
               "report": {"k": 4}, "endpoints": {**params["endpoints"], "cheap": CHEAP},
               "deepconf": {"datasets": ["toy"], "endpoints": ["cheap"]}, "study": {"datasets": ["toy"]}}
    project = make_project(tmp_path / "project", params)
    result = dvc(project, "repro", "study@toy")
    assert ran_stages(result.stdout) >= {"build_pool", "build_pool_model", "aggregate_model", "study"}
    run(project, "git", "add", "-A")
    run(project, "git", "commit", "-qm", "study")

    shown = json.loads(dvc(project, "metrics", "show", "--json").stdout)
    metrics = {path: found["data"] for revision in shown.values() for path, found in revision["data"].items()}
    cheap = metrics["metrics/headline/study/toy/cheap/cons.json"]
    main = metrics["metrics/headline/study/toy/deepseek/cons.json"]
    assert cheap["simulated"] is True and cheap["k"] == main["k"] == 4
    assert cheap["usd_per_problem"] < main["usd_per_problem"]  # a tenth to a third of deepseek's prices
    assert "vs_reference_pts" in cheap and "vs_reference_pts" not in main
    assert (project / "metrics" / "study" / "toy" / "study.md").read_text().startswith("**SIMULATED")

    update_params(project, {"endpoints": {"cheap": {"pricing": {"output": 1.0}}}})
    result = dvc(project, "repro", "study@toy")
    assert ran_stages(result.stdout) == {"study"}
    diff = json.loads(dvc(project, "metrics", "diff", "--json").stdout)
    changed = diff["metrics/headline/study/toy/cheap/cons.json"]
    assert changed["usd_per_problem"]["new"] > changed["usd_per_problem"]["old"]
    assert "metrics/headline/study/toy/deepseek/cons.json" not in diff or \
        "usd_per_problem" not in diff["metrics/headline/study/toy/deepseek/cons.json"]
    assert yaml.safe_load((project / "params.yaml").read_text())["study"]["datasets"] == ["toy"]
