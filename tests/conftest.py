"""Shared fixtures: the repository root, the tests' own params, the shared data folder that CI places
beside the clone, and waiting for an observable event instead of sleeping a fixed time."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
# Tests start from these defaults, never from the workspace's params.yaml, which users edit.
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_PARAMS = FIXTURES / "params.yaml"
EVENT_TIMEOUT_S = 300.0  # only reached when nothing happens at all, not when the machine is slow
# pyproject.toml's per-test limit, for a run where pytest-timeout is off (timeout 0, or the plugin disabled)
DEFAULT_TEST_TIMEOUT_S = 1800.0
_per_test_timeout_s = DEFAULT_TEST_TIMEOUT_S


def pytest_configure(config: pytest.Config) -> None:
    """Read the per-test limit as pytest-timeout does: --timeout, else PYTEST_TIMEOUT, else pyproject.toml's."""
    global _per_test_timeout_s
    if not config.pluginmanager.hasplugin("timeout"):
        return
    setting = config.getoption("timeout")
    if setting is None:
        setting = os.environ.get("PYTEST_TIMEOUT") or config.getini("timeout")
    if setting and float(setting) > 0:
        _per_test_timeout_s = float(setting)


def hang_guard_s() -> float:
    """How long a test lets a subprocess (or a server's first line, or a thread) run before it takes it for a hang:
    the per-test limit pytest-timeout enforces (1800 s in pyproject.toml). One setting for every such wait, so load
    alone never ends one that the test's own limit would let finish: on a machine loaded past that, raise both with
    `PYTEST_TIMEOUT=3600 make test` (or `make test PYTEST_ARGS=--timeout=3600`). Never a measure of speed: no test
    asserts how long anything takes."""
    return _per_test_timeout_s


def committed_params_text() -> str:
    """params.yaml as the repository ships it (its last commit), whatever a user has edited in the workspace:
    for the tests about the shipped file itself. Skips where there is no git or no repository (an sdist)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed: no committed params.yaml to read")
    shown = subprocess.run(["git", "show", "HEAD:params.yaml"], cwd=REPO_ROOT, capture_output=True, text=True,
                           check=False, timeout=hang_guard_s())
    if shown.returncode != 0:
        pytest.skip(f"no committed params.yaml in {REPO_ROOT}: {shown.stderr.strip()}")
    return shown.stdout


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip: the real AIME files live there and are never copied into the repo."""
    data = SHARED_DIR / "data"
    if not (data / "aime_2025.jsonl").is_file():
        pytest.skip(f"shared data not found at {data} (CI places ../shared beside the clone)")
    return data


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = EVENT_TIMEOUT_S) -> None:
    """Poll `condition` until it holds; fail naming `what` if it still does not after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout_s:g} s for {what}")
        time.sleep(0.01)


# `make test` hands whole files to its workers (--dist loadfile) in collection order (--no-loadscope-reorder, since
# xdist's own order, most tests first, leaves a two-test file of DVC runs for last, one worker idle meanwhile): the
# files that drive DVC or subprocesses go first, the longest measured first, so the many quick files fill the end.
# Measured 2026-11-26 (per-file totals of one --junitxml run; the engine file and the pool-steps pipeline, added
# after it, placed by their own durations); the param-change groups, split out of test_pipeline.py on 2026-11-27,
# placed by --durations of the files together: the projects they build are built once per run for both workers
# (tests/dvcproject.py's built_once), and profiles between them lets the other worker start without waiting for
# the pipeline's build. test_live_stage.py and the slow files after test_remote.py placed by per-file totals of one
# --junitxml run of the slow files on 2026-12-07 (test_live_stage.py was then the longest of them); paths under tests/.
# explorer/test_method_pages.py before the last four of them (~125 s of summed wall): it builds the methods project
# (built_once) long before explorer/test_methods_browser.py, which reads the same one, starts; side by side in
# collection order, the two started together and one worker sat idle 12 s while the other built it.
# Not --dist loadgroup: pytest-xdist 3.8 marks a group by rewriting an item's private _nodeid, which pytest 9 no
# longer reads, so every test of a grouped file would go to either worker and its module fixtures be built on both.
LONGEST_FIRST = ("test_pipeline_param_changes.py", "test_profiles_pipeline.py", "test_live_stage.py",
                 "test_pipeline.py", "test_ledgers_ignored.py",
                 "engine/test_real_engine.py", "datasets/test_data_stages.py", "test_stage_failures.py",
                 "test_profile_endpoints.py",
                 "critique/test_build.py", "test_remote.py", "sampling/test_build_n.py", "test_grading_pipeline.py",
                 "test_misplaced_ledger_files.py", "cli/test_preset.py", "test_workflow.py",
                 "test_pipeline_experiments.py", "sampling/test_build.py",
                 "explorer/test_method_pages.py",
                 "sampling/test_run_control.py", "core/test_check_params.py", "test_bench.py",
                 "test_pool_steps_pipeline.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("random_order_enabled", default=False):  # `make test-random` shuffles the files on purpose
        return

    def cost_rank(item: pytest.Item) -> tuple[int, int]:
        if not item.path.is_relative_to(FIXTURES.parent):  # a doctest of src/ (pyproject's testpaths)
            return 2, 0
        name = item.path.relative_to(FIXTURES.parent).as_posix()
        if name in LONGEST_FIRST:
            return 0, LONGEST_FIRST.index(name)
        return (1 if item.get_closest_marker("slow") else 2), 0

    items.sort(key=cost_rank)  # stable: each file's tests keep their order


_run_tmp_path_factories: list[pytest.TempPathFactory] = []


@pytest.fixture(scope="session", autouse=True)
def remember_run_tmp_path_factory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the run's temporary-folder factory for helpers that tests call without fixtures (tests/dvcproject.py's
    init_repos copies what `dvc init` made once this run)."""
    _run_tmp_path_factories[:] = [tmp_path_factory]


def run_tmp_path_factory() -> pytest.TempPathFactory:
    """The run's temporary-folder factory, kept by remember_run_tmp_path_factory."""
    assert _run_tmp_path_factories, "no pytest session has started: run this under pytest"
    return _run_tmp_path_factories[0]
