"""Several models in one DeepConf study (issue 33, item 1), as a real DVC project against a loopback simulator that
records every request: adding a model to deepconf.endpoints builds only its pool (requests for its model only) and
runs its own scoring and aggregation, the first model's pool stays cached with the same dvc.lock entry, and a
price change re-runs nothing. (docs_commands runs every stage, the main model's and a second model's, end to end.)"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dvcproject import dvc, make_project, model_overrides, one_dataset, run, update_params
from tests.sim_servers import RecordingServer, recording_server
from tests.test_pipeline import MODEL_STAGES, changed_stages, ran_stages
from tracevote.cli.demo import BUILTIN_PROBLEMS
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.study_paths import model_paths

pytestmark = pytest.mark.slow

MAIN, OTHER, OTHER_NAME = "deepseek", "qwen-local", "qwen-sim"
PROBLEMS, N_POOL = 3, 4
MAIN_POOL = "build_pool"
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.5, mean_tokens=60)


def small_study(root: Path, url: str) -> dict[str, Any]:
    """Three problems x 4 samples of ~60 tokens from the loopback server, which plays DeepSeek."""
    problems = root / "problems.jsonl"
    problems.write_text("".join(BUILTIN_PROBLEMS.read_text(encoding="utf-8").splitlines(keepends=True)[:PROBLEMS]),
                        encoding="utf-8")
    return {**one_dataset("toy", problems), **model_overrides(base_url=url, needs_key=False),
            "decoding": {"max_tokens": 200, "top_logprobs": 5}, "pool": {"n_pool": N_POOL, "concurrency": 4},
            "confidence": {"group_size": 32, "tail_tokens": 32}, "eval": {"k": [1, 2, 4], "repeat": 4},
            "online": {"warmup": 2}, "report": {"k": 4}}


def second_model(url: str, output_price: float) -> dict[str, Any]:
    """deepconf.endpoints: [qwen-local], a model of the same server under another name and price."""
    return {"deepconf": {"endpoints": [OTHER]},
            "endpoints": {OTHER: {"profile": "deepseek", "base_url": url, "name": OTHER_NAME, "extra_body": {},
                                  "reasoning_effort": None, "api_key_env": "QWEN_API_KEY", "needs_key": False,
                                  "sim": None,
                                  "pricing": {"checked": "2026-07", "input_cache_miss": 0.05,
                                              "input_cache_hit": 0.05, "output": output_price}}}}


def models_requested(server: RecordingServer, since: int) -> Counter[str]:
    """The model each request after the first `since` named."""
    return Counter(body["model"] for body in server.bodies[since:])


def lock_entries(project: Path, group: str) -> dict[str, Any]:
    stages = yaml.safe_load((project / "dvc.lock").read_text(encoding="utf-8"))["stages"]
    return {name: entry for name, entry in stages.items() if name.split("@")[0] == group}


def test_adding_a_model_builds_only_its_pool(tmp_path: Path) -> None:
    with recording_server(SIM) as server:
        project = make_project(tmp_path / "project", small_study(tmp_path, server.base_url))
        first = dvc(project, "repro", MAIN_POOL)
        assert ran_stages(first.stdout) == {"fetch", "normalize", MAIN_POOL}
        assert set(models_requested(server, 0)) == {"deepseek-v4-flash"}
        run(project, "git", "add", "-A")
        run(project, "git", "commit", "-qm", "the first model")
        before, sent = lock_entries(project, MAIN_POOL), len(server.bodies)

        update_params(project, second_model(server.base_url, output_price=0.9))
        second = dvc(project, "repro", MAIN_POOL, "aggregate_model")  # the new model's whole chain
        assert ran_stages(second.stdout) == MODEL_STAGES
        assert "Stage 'build_pool@toy' didn't change, skipping" in second.stdout
        requested = models_requested(server, sent)
        assert set(requested) == {OTHER_NAME} and requested[OTHER_NAME] >= PROBLEMS * N_POOL  # and the probe
        assert lock_entries(project, MAIN_POOL) == before

        paths = model_paths(OTHER, "toy", MAIN)
        assert json.loads((project / paths.manifest).read_text())["samples"] == PROBLEMS * N_POOL
        assert json.loads((project / paths.aggregate).read_text())["model"] == OTHER_NAME
        assert (project / paths.scores).is_file() and (project / paths.stops).is_file()
        run(project, "git", "add", "-A")
        assert not run(project, "git", "status", "--porcelain", "--", "study/qwen-local/pools/toy").stdout

        update_params(project, second_model(server.base_url, output_price=2.5))  # a new price: no new result
        assert not changed_stages(project) & {MAIN_POOL, *MODEL_STAGES}  # the others never ran here


def test_a_model_over_http_without_a_sim_key_is_refused_in_one_line_before_any_request(tmp_path: Path) -> None:
    """Over HTTP (model.backend: openai) no stage reads endpoints.<key>.sim, but its stages declare it and DVC
    refuses a declared param that is missing: check_params, the first stage, says so with the fix."""
    with recording_server(SIM) as server:
        params = {**small_study(tmp_path, server.base_url), "model": {"backend": "openai"}}
        project = make_project(tmp_path / "project", params)
        other = second_model(server.base_url, output_price=0.9)
        del other["endpoints"][OTHER]["sim"]
        update_params(project, other)
        refused = dvc(project, "repro", check=False)
        assert refused.returncode != 0 and not server.bodies
        said = [line for line in refused.stderr.splitlines() if f"endpoints.{OTHER}.sim" in line]
        assert said == [f"error: params.yaml: endpoints.{OTHER}.sim: missing: a model of deepconf.endpoints needs it "
                        "even when model.backend is openai (its DeepConf stages declare it, and DVC refuses a declared "
                        "param that is missing): add `sim: null` (model.sim as it is) or the keys of model.sim to "
                        "replace, e.g. {accuracy: 0.3}"]
