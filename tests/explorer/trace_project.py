"""bench.explorer_trace_project's small project (its default shape), built once per test run for every test file
that reads it (tests.dvcproject.built_once), its stages run in the test's own process: read it, never change it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.explorer_trace_project import PoolProject, build_project
from tests.dvcproject import built_once
from tests.stage_here import bench_stage_here
from tracevote.core.config import load_params


def build_here(root: Path) -> None:
    build_project(root, run_stage=bench_stage_here)


def trace_project(tmp_path_factory: pytest.TempPathFactory) -> PoolProject:
    root = built_once(tmp_path_factory, "explorer_trace", build_here)
    return PoolProject(root, load_params(root / "params.yaml"))
