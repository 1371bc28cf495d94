"""A model of deepconf.endpoints is simulated with its own sim: keys (issue 33: two simulated endpoints with
different accuracies): the in-process simulator build_pool opens for it answers as that model, the main model as
model.sim, and each pool's setting, hence its folder, records which."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import FIXTURE_PARAMS
from tracevote.answers.extract import extract_answer
from tracevote.core.config import Params, load_params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.datasets.problems import Problem
from tracevote.sampling import backend
from tracevote.sampling.prompts import setting_messages
from tracevote.store.pool import Setting

PROBLEMS = [Problem(f"p{n}", f"What is {n} + 7? Put the answer in \\boxed{{}}.", n + 7) for n in range(3)]
SAMPLES = 4


def study(tmp_path: Path) -> Params:
    """The simulator, always wrong for the main model (model.sim accuracy 0), always right for qwen (its sim: 1)."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["model"] = {"backend": "sim", "sim": {**params["model"]["sim"], "accuracy": 0.0, "mean_tokens": 30}}
    params["decoding"].update(max_tokens=120, top_logprobs=5)
    params["deepconf"]["endpoints"] = ["qwen"]
    params["endpoints"]["qwen"] = {**params["endpoints"]["deepseek"], "name": "qwen-sim", "sim": {"accuracy": 1.0}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return load_params(path)


def answers_of(params: Params, model: ModelConfig) -> list[tuple[int | None, int | str]]:
    """(extracted answer, gold) of each sample the model's simulator gives, as build_pool samples them."""
    messages = setting_messages(PROBLEMS, Setting.from_params(params, model))
    with backend.open_sampler(params, PROBLEMS, None, model=model) as sampler:
        return [(extract_answer(sampler.sample(messages[p.id], p.id, i).sample.text), p.answer)
                for p in PROBLEMS for i in range(SAMPLES)]


def test_each_model_is_simulated_with_its_own_accuracy(tmp_path: Path) -> None:
    params = study(tmp_path)
    main = answers_of(params, params.deepconf_model)
    other = answers_of(params, params.study_model("qwen"))
    assert not [answer for answer, gold in main if answer == gold]
    answered = [(answer, gold) for answer, gold in other if answer is not None]
    assert answered and all(answer == gold for answer, gold in answered)


def test_each_models_pool_setting_records_its_simulated_model(tmp_path: Path) -> None:
    params = study(tmp_path)
    main = Setting.from_params(params)
    other = Setting.from_params(params, params.study_model("qwen"))
    assert '"accuracy":0.0' in main.sim.replace(" ", "") and '"accuracy":1.0' in other.sim.replace(" ", "")
    assert (main.model, other.model) == ("deepseek-v4-flash", "qwen-sim")
    assert main.folder_name != other.folder_name
