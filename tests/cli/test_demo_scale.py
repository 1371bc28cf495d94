"""The demo's simulated build sends 2 requests at a time (server and client share one process and its GIL: more
only add switching, docs/simulator.md), while the committed params.yaml keeps the concurrency a real run uses."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import committed_params_text
from tracevote.cli.demo import BUILTIN_PROBLEMS, DEMO_CONCURRENCY, demo_overrides, with_overrides, write_params
from tracevote.core.config import load_params


def test_the_demo_builds_its_simulated_pool_2_requests_at_a_time(tmp_path: Path) -> None:
    committed = yaml.safe_load(committed_params_text())
    demo = with_overrides(committed, demo_overrides(BUILTIN_PROBLEMS, problem_key="problem"))
    assert demo["model"]["backend"] == "sim"
    assert demo["pool"]["concurrency"] == DEMO_CONCURRENCY == 2
    write_params(tmp_path / "params.yaml", demo)
    assert load_params(tmp_path / "params.yaml").pool.concurrency == 2
    assert committed["pool"]["concurrency"] == 8
