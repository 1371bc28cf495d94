"""dvc.yaml's DeepConf stages spell the paths tracevote.core.study_paths gives: the main model's stages as they
always were, each other model's (the matrix stages over deepconf.endpoints) under study/<endpoint>/."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tracevote.core.study_paths import (
    AGGREGATE_STAGE,
    POOL_STAGE,
    SCORE_STAGE,
    ModelPaths,
    model_paths,
    model_stage,
    pool_stage,
)

DATASET, MAIN, OTHER = "aime_2025", "deepseek", "qwen-local"
STAGES = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def resolved(stage: dict, dataset: str, endpoint: str) -> dict[str, list[str]]:
    """The stage's command arguments and outs with ${item...} filled as DVC would for (dataset, endpoint)."""
    body = stage.get("do", stage)  # a foreach stage's body
    text = yaml.safe_dump({"cmd": body["cmd"], "outs": [next(iter(out)) for out in body["outs"]]})
    for name, value in (("${item.dataset}", dataset), ("${item.endpoint}", endpoint), ("${item}", dataset)):
        text = text.replace(name, value)
    filled = yaml.safe_load(text)
    return {"cmd": shlex.split(filled["cmd"]), "outs": filled["outs"]}


def flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def spelled(stages: tuple[str, str, str], dataset: str, endpoint: str) -> ModelPaths:
    """The paths the three stages' commands name, as a ModelPaths."""
    pool, score, aggregate = (resolved(STAGES[name], dataset, endpoint)["cmd"] for name in stages)
    return ModelPaths(endpoint=endpoint, dataset=dataset, pools=Path(flag(pool, "--pools")),
                      manifest=Path(flag(pool, "--manifest")), scores=Path(flag(score, "--out")),
                      stops=Path(flag(score, "--stops")), aggregate=Path(flag(aggregate, "--out")))


@pytest.mark.parametrize(("stages", "endpoint"), [
    (("build_pool", "score", "aggregate"), MAIN),
    ((POOL_STAGE, SCORE_STAGE, AGGREGATE_STAGE), OTHER),
])
def test_the_stages_spell_the_study_paths(stages: tuple[str, str, str], endpoint: str) -> None:
    paths = model_paths(endpoint, DATASET, MAIN)
    assert spelled(stages, DATASET, endpoint) == paths
    outs = {name: resolved(STAGES[name], DATASET, endpoint)["outs"] for name in stages}
    assert outs[stages[0]] == [str(paths.pools), str(paths.manifest)]
    assert outs[stages[1]] == [str(paths.scores), str(paths.stops)]
    assert outs[stages[2]] == [str(paths.aggregate)]


def test_the_other_models_live_under_study() -> None:
    paths = model_paths(OTHER, DATASET, MAIN)
    assert [str(path) for path in (paths.pools, paths.manifest, paths.scores, paths.stops, paths.aggregate)] == [
        "study/qwen-local/pools/aime_2025", "study/qwen-local/pools/aime_2025.json",
        "study/qwen-local/scores/aime_2025.parquet", "study/qwen-local/scores/aime_2025.stops.parquet",
        "study/qwen-local/aggregate/aime_2025.json"]


def test_the_model_stages_are_a_matrix_over_datasets_then_endpoints() -> None:
    for name in (POOL_STAGE, SCORE_STAGE, AGGREGATE_STAGE):
        assert STAGES[name]["matrix"] == {"dataset": "${deepconf.datasets}", "endpoint": "${deepconf.endpoints}"}
    assert "--endpoint" in resolved(STAGES[POOL_STAGE], DATASET, OTHER)["cmd"]
    assert model_stage(POOL_STAGE, DATASET, OTHER) == "build_pool_model@aime_2025-qwen-local"


def test_a_model_stage_declares_only_its_own_endpoint() -> None:
    declared = STAGES[POOL_STAGE]["params"]
    endpoints = [key for key in declared if key.startswith("endpoints.")]
    assert endpoints == [f"endpoints.${{item.endpoint}}.{key}"
                         for key in ("name", "extra_body", "reasoning_effort", "profile", "sim")]
    assert not any(key.startswith("deepconf") for key in declared)  # the list and the main model: none re-runs it


@pytest.mark.parametrize(("endpoint", "stage"), [(MAIN, "build_pool@aime_2025"),
                                                 (OTHER, "build_pool_model@aime_2025-qwen-local")])
def test_a_manifest_names_the_stage_that_writes_it(endpoint: str, stage: str) -> None:
    manifest = model_paths(endpoint, DATASET, MAIN).manifest
    assert pool_stage(manifest, DATASET) == pool_stage(Path("/work/project") / manifest, DATASET) == stage
