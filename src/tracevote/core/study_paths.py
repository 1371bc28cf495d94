"""Where each model's DeepConf files live, so the stages that write them and the study that reads them agree.

`deepconf.endpoint`, the project's main model, keeps the paths it has always had (pools/<dataset>, data/scores/,
data/aggregate/); each model of `deepconf.endpoints` has the same files under study/<endpoint>/. dvc.yaml spells
the same paths out; tests/core/test_study_paths.py holds the two together.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STUDY_ROOT = Path("study")
# dvc.yaml's stages of the models of deepconf.endpoints, a DVC matrix over (dataset, endpoint)
POOL_STAGE, SCORE_STAGE, AGGREGATE_STAGE = "build_pool_model", "score_model", "aggregate_model"


@dataclass(frozen=True)
class ModelPaths:
    """One (model, dataset)'s DeepConf files, relative to the project's root."""

    endpoint: str
    dataset: str
    pools: Path
    manifest: Path
    scores: Path
    stops: Path
    aggregate: Path


def model_paths(endpoint: str, dataset: str, main_endpoint: str) -> ModelPaths:
    """The files of `endpoint`'s DeepConf run on `dataset`; `main_endpoint` is deepconf.endpoint."""
    root = Path(".") if endpoint == main_endpoint else STUDY_ROOT / endpoint
    data = Path("data") if endpoint == main_endpoint else root
    return ModelPaths(
        endpoint=endpoint,
        dataset=dataset,
        pools=root / "pools" / dataset,
        manifest=root / "pools" / f"{dataset}.json",
        scores=data / "scores" / f"{dataset}.parquet",
        stops=data / "scores" / f"{dataset}.stops.parquet",
        aggregate=data / "aggregate" / f"{dataset}.json",
    )


def model_stage(group: str, dataset: str, endpoint: str) -> str:
    """The stage as DVC names a matrix's instance: model_stage("build_pool_model", "aime_2025", "qwen-local") ->
    "build_pool_model@aime_2025-qwen-local" (dvc.yaml's matrix lists dataset before endpoint)."""
    return f"{group}@{dataset}-{endpoint}"
