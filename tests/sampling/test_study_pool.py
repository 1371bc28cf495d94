"""A model of deepconf.endpoints is simulated with its own sim: keys (issue 33: two simulated endpoints with
different accuracies): the in-process simulator build_pool opens for it answers as that model, the main model as
model.sim, and each pool's setting, hence its folder, records which. build_pool --endpoint, as build_pool_model
runs it, keeps the fresh-clone guard under its own stage name, and refuses a model not in the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tests.dvcproject import run_stage
from tracevote.answers.extract import extract_answer
from tracevote.core.config import Params, load_params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.datasets.problems import Problem
from tracevote.sampling import backend
from tracevote.sampling.prompts import setting_messages
from tracevote.store.pool import Setting

PROBLEMS = [Problem(f"p{n}", f"What is {n} + 7? Put the answer in \\boxed{{}}.", n + 7) for n in range(3)]
SAMPLES = 4


def study_file(tmp_path: Path) -> Path:
    """The simulator, always wrong for the main model (model.sim accuracy 0), always right for qwen (its sim: 1)."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["model"] = {"backend": "sim", "sim": {**params["model"]["sim"], "accuracy": 0.0, "mean_tokens": 30}}
    params["decoding"].update(max_tokens=120, top_logprobs=5)
    params["deepconf"]["endpoints"] = ["qwen"]
    params["endpoints"]["qwen"] = {**params["endpoints"]["deepseek"], "name": "qwen-sim", "sim": {"accuracy": 1.0}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def study(tmp_path: Path) -> Params:
    return load_params(study_file(tmp_path))


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


def build_model_pool(root: Path, endpoint: str) -> tuple[int, str]:
    """stages/build_pool.py as build_pool_model@aime_2025-<endpoint> runs it: (exit code, stderr)."""
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "aime_2025.jsonl").write_text("".join(json.dumps(p.to_record()) + "\n" for p in PROBLEMS),
                                                   encoding="utf-8")
    result = run_stage(root, "build_pool.py", "--dataset", "aime_2025", "--endpoint", endpoint, "--problems",
                       "data/aime_2025.jsonl", "--pools", f"study/{endpoint}/pools/aime_2025", "--manifest",
                       f"study/{endpoint}/pools/aime_2025.json", check=False)
    return result.returncode, result.stderr


def test_a_model_pool_that_dvc_lock_records_is_not_paid_for_again(tmp_path: Path) -> None:
    study_file(tmp_path)
    n_pool = yaml.safe_load((tmp_path / "params.yaml").read_text())["pool"]["n_pool"]
    recorded = {"endpoints.qwen.name": "qwen-sim", "endpoints.qwen.sim": {"accuracy": 1.0}, "pool.n_pool": n_pool}
    entry = {"cmd": "python stages/build_pool.py", "params": {"params.yaml": recorded}}
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0",
                                                       "stages": {"build_pool_model@aime_2025-qwen": entry}}))
    code, err = build_model_pool(tmp_path, "qwen")
    assert code != 0 and "dvc.lock records a finished build_pool_model@aime_2025-qwen with exactly these params" in err
    assert "dvc pull" in err and "Traceback" not in err
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize(("endpoint", "says"), [
    ("gpt-4o-mini", "error: --endpoint gpt-4o-mini: not one of deepconf.endpoints (qwen); deepconf.endpoint's own "
                    "pool is built without --endpoint"),
    ("deepseek", "error: --endpoint deepseek: not one of deepconf.endpoints (qwen);"),
])
def test_a_model_not_in_the_study_is_refused_in_one_line(tmp_path: Path, endpoint: str, says: str) -> None:
    study_file(tmp_path)
    code, err = build_model_pool(tmp_path, endpoint)
    assert code == 2 and err.startswith(says) and err.count("\n") == 1, err
    assert not (tmp_path / "study").exists()
