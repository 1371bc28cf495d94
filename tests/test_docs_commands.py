"""The docs' blocks marked `<!-- docs-check: run -->` run as written, in one scratch project on the simulated model,
from a shell that has no venv on PATH (`run activated`: with it, as after `source .venv/bin/activate`). The same
run records which params keys each stage reads (TRACEVOTE_PARAMS_READS), and each stage must declare exactly
those in dvc.yaml (tracevote.core.stage_params says which reads need no declaration, and why)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, hang_guard_s
from tests.docsnippets import every_snippet
from tests.dvcproject import make_project, one_dataset, project_env, run
from tests.fresh_clone import copy_plots_template
from tests.test_pipeline import small_sim_params
from tracevote.cli.demo import BUILTIN_PROBLEMS
from tracevote.core.entry import PARAMS_READS_ENV
from tracevote.core.stage_params import declaration_problems, every_stage_params

pytestmark = pytest.mark.slow
VENV = Path(sys.executable).parent.parent
RUN_BLOCKS = [snippet for snippet in every_snippet() if snippet.marker in ("run", "run activated")]
# what `make setup` needs beside the pipeline; their mtimes are set old, so it finds the venv up to date
SETUP_FILES = ("Makefile", "requirements.txt", "requirements-dev.txt", "pyproject.toml")


def fresh_shell_env(reads: Path, *, activated: bool) -> dict[str, str]:
    """A shell's environment with no venv on PATH (or this one first, `activated`), recording params reads."""
    env = project_env({PARAMS_READS_ENV: str(reads), "TRACEVOTE_WORKERS": "1"})  # workers' reads are in-process
    env.pop("VIRTUAL_ENV", None)
    bin_dir = (VENV / "bin").resolve()
    kept = [entry for entry in env["PATH"].split(os.pathsep) if entry and Path(entry).resolve() != bin_dir]
    env["PATH"] = os.pathsep.join([str(bin_dir), *kept] if activated else kept)
    return env


@pytest.fixture(scope="module")
def documented_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """The scratch project after every marked block ran: (project, reads folder, each block's output)."""
    if not (VENV / ".runtime-installed").is_file():
        pytest.skip(f"{VENV} was not set up by `make setup` (no .runtime-installed stamp)")
    base = tmp_path_factory.mktemp("docs-run")
    # the README's dataset name, on the built-in problems; the critic on, so every stage reads what it can
    params = {**small_sim_params(), **one_dataset("aime_2025", BUILTIN_PROBLEMS)}
    params["grading"]["critic"] = {"enabled": True}
    params["online"] = {"warmup": 4, "live": {"datasets": ["aime_2025"], "methods": ["low", "high"], "budget": 16}}
    # a second model of the DeepConf study, simulated with its own accuracy: its matrix stages run and are checked too
    params["deepconf"] = {**params["deepconf"], "endpoints": ["qwen-local"]}
    params["endpoints"] = {**params["endpoints"], "qwen-local": {
        "profile": "local", "base_url": "http://127.0.0.1:8000/v1", "name": "Qwen/Qwen3-8B", "extra_body": {},
        "reasoning_effort": None, "api_key_env": "VLLM_API_KEY", "needs_key": False, "sim": {"accuracy": 0.3},
        "pricing": {"checked": "2026-07", "input_cache_miss": 0.05, "input_cache_hit": 0.05, "output": 0.2}}}
    project = make_project(base / "project", params)
    for name in SETUP_FILES:
        shutil.copy(REPO_ROOT / name, project / name)
        os.utime(project / name, (0, 0))
    (project / ".venv").symlink_to(VENV)
    copy_plots_template(tmp_path_factory, project)  # as the venv, what `make setup` makes is there, up to date
    reads, outputs = base / "reads", []
    for block in RUN_BLOCKS:
        env = fresh_shell_env(reads, activated=block.marker == "run activated")
        result = subprocess.run(["bash", "-e", "-c", block.text], cwd=project, env=env, capture_output=True,
                                text=True, timeout=hang_guard_s())
        assert result.returncode == 0, f"{block.where}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        outputs.append(result.stdout + result.stderr)
    return project, reads, outputs


def test_the_readme_commands_run_in_a_fresh_shell(documented_run: tuple[Path, Path, list[str]]) -> None:
    project, _, outputs = documented_run
    assert [block.where for block in RUN_BLOCKS if block.path.name == "README.md"], "no README block runs"
    assert any("Running stage 'report@aime_2025'" in output for output in outputs)
    assert json.loads((project / "metrics" / "headline" / "deepconf" / "aime_2025" / "cons.json").read_text())
    # the trap the docs warn of: dvc from the venv, its stages' `python` from a PATH without it
    env = fresh_shell_env(project / "unused", activated=False)
    trapped = run(project, ".venv/bin/dvc", "repro", "--force", "normalize@aime_2025", env=env, check=False)
    assert trapped.returncode != 0 and "No module named 'tracevote'" in trapped.stdout + trapped.stderr


def test_each_stage_declares_exactly_the_params_it_reads(documented_run: tuple[Path, Path, list[str]]) -> None:
    project, reads_folder, _ = documented_run
    reads = {record["stage"]: record["reads"] for record in
             (json.loads(path.read_text()) for path in reads_folder.glob("*.json"))}
    declared = every_stage_params(project)
    assert set(declared) - {"check_params"} <= set(reads), "a stage did not run in the documented commands"
    leaves = dotted_leaves(yaml.safe_load((project / "params.yaml").read_text()))
    problems = [problem for stage in sorted(declared) if stage != "check_params"  # it reads the whole file
                for problem in declaration_problems(stage, reads[stage], declared[stage], leaves)]
    assert problems == [], "\n".join(problems)


def dotted_leaves(params: dict, prefix: str = "") -> list[str]:
    """{"a": {"b": 1, "c": [2]}} -> ["a.b", "a.c"]."""
    leaves = []
    for key, value in params.items():
        dotted = f"{prefix}{key}"
        leaves += dotted_leaves(value, dotted + ".") if isinstance(value, dict) and value else [dotted]
    return leaves
