"""deepconf.endpoints, the other models of a DeepConf study: keys of endpoints:, other than deepconf.endpoint,
returning logprobs, each with a sim: key (its stages declare it); and each model's own simulated model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tracevote.core.config import Params, load_params
from tracevote.core.errors import ConfigError

QWEN = {"profile": None, "base_url": "http://127.0.0.1:8000/v1", "name": "Qwen/Qwen3-8B", "extra_body": {},
        "api_key_env": "VLLM_API_KEY", "needs_key": False, "sim": {"accuracy": 0.3, "mean_tokens": 900},
        "pricing": {"checked": "2026-07", "input_cache_miss": 0.0, "input_cache_hit": 0.0, "output": 0.0}}
REMOVE = object()  # as a change's value: remove the key


def study_params(tmp_path: Path, models: list[str], **endpoint_changes: dict[str, Any]) -> Path:
    """The tests' params with endpoint qwen-local added, deepconf.endpoints set to `models`, and each
    endpoint_changes[key] merged into that endpoint's entry (REMOVE removes the key)."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["endpoints"]["qwen-local"] = dict(QWEN)
    params["deepconf"]["endpoints"] = models
    for key, changes in endpoint_changes.items():
        entry = params["endpoints"][key.replace("_", "-")]
        for name, value in changes.items():
            if value is REMOVE:
                del entry[name]
            else:
                entry[name] = value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def test_a_study_model_is_simulated_with_its_own_keys_replaced(tmp_path: Path) -> None:
    params: Params = load_params(study_params(tmp_path, ["qwen-local"]))
    assert params.deepconf.endpoints == ("qwen-local",)
    main, other = params.deepconf_model, params.study_model("qwen-local")
    assert main.sim == params.model.sim
    assert (other.sim.accuracy, other.sim.mean_tokens) == (0.3, 900)
    assert (other.sim.signal, other.sim.seed) == (params.model.sim.signal, params.model.sim.seed)
    assert (other.endpoint, other.name, other.profile.name) == ("qwen-local", "Qwen/Qwen3-8B", "local")


def test_sim_null_is_model_sim_as_it_is(tmp_path: Path) -> None:
    params = load_params(study_params(tmp_path, ["qwen-local"], qwen_local={"sim": None}))
    assert params.endpoints["qwen-local"].sim is None
    assert params.study_model("qwen-local").sim == params.model.sim


@pytest.mark.parametrize(("models", "changes", "says"), [
    (["deepseek"], {}, "deepconf.endpoints[0]: 'deepseek' must be another model than deepconf.endpoint (deepseek "
                       "is it): list only the other models"),
    (["qwen-locl"], {}, "deepconf.endpoints[0]: 'qwen-locl' must be a key of endpoints: (deepseek, "),
    (["qwen-local", "qwen-local"], {}, "deepconf.endpoints: ['qwen-local', 'qwen-local'] must be without repeats"),
    (["gpt-5-nano"], {}, "deepconf.endpoints[0]: 'gpt-5-nano' must be an endpoint that returns logprobs"),
    (["qwen-local"], {"qwen_local": {"sim": REMOVE}}, "endpoints.qwen-local.sim: missing: a model of "
                                                    "deepconf.endpoints needs it even when model.backend is "),
    ([], {}, "endpoints.qwen-local.sim: {'seed': None, 'signal': None, 'accuracy': 0.3, 'mean_tokens': 900} must "
             "be null or absent: only a model of deepconf.endpoints has its own simulated model"),
    (["qwen-local"], {"deepseek": {"sim": {"accuracy": 0.9}}}, "endpoints.deepseek.sim: "),
    (["qwen-local"], {"qwen_local": {"sim": {"accuracy": 1.5}}}, "endpoints.qwen-local.sim.accuracy: 1.5 must be "
                                                                 "in [0, 1]"),
    (["qwen-local"], {"qwen_local": {"sim": {"acuracy": 0.5}}}, "endpoints.qwen-local.sim.acuracy: unknown key "
                                                                "(did you mean accuracy?"),
])
def test_a_bad_study_model_is_one_line_naming_the_key(tmp_path: Path, models: list[str], changes: dict,
                                                      says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_params(study_params(tmp_path, models, **changes))
    lines = [line for line in str(refused.value).splitlines() if says in line]
    assert len(lines) == 1, str(refused.value)


def test_two_models_whose_stage_names_meet_are_refused(tmp_path: Path) -> None:
    """aime_2025 with endpoint a-qwen and aime_2025-a with endpoint qwen are both build_pool_model@aime_2025-a-qwen."""
    path = study_params(tmp_path, ["a-qwen", "qwen"])
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    params["endpoints"] = {**params["endpoints"], "a-qwen": QWEN, "qwen": QWEN}
    del params["endpoints"]["qwen-local"]
    params["datasets"]["aime_2025-a"] = params["datasets"]["aime_2025"]
    params["deepconf"]["datasets"] = ["aime_2025", "aime_2025-a"]
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_params(path)
    assert str(refused.value).splitlines() == [
        f"{path}: deepconf.endpoints: ['a-qwen', 'qwen'] must be models whose stage names differ: dataset aime_2025-a "
        f"with endpoint qwen and dataset aime_2025 with endpoint a-qwen are both build_pool_model@aime_2025-a-qwen "
        f"(rename one endpoint)"]
