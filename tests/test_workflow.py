"""The Makefile's workflows in real clones: `make demo` leaves the workspace clean; `make repro` after kill -9."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s, wait_for
from tests.dvcproject import dvc, make_project, project_env, run
from tests.fresh_clone import VENV, copy_plots_template, make, set_up_clone, venv_stamp  # noqa: F401 (a fixture)
from tests.images import assert_not_blank
from tests.sim_servers import watched_server
from tests.test_dvc_locks import sleeper
from tests.test_pipeline import small_sim_params
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.faults import FaultPlan

pytestmark = pytest.mark.slow


def test_make_demo_in_a_fresh_clone_leaves_git_status_clean(tmp_path: Path, venv_stamp: None,  # noqa: F811
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    clone = set_up_clone(tmp_path_factory, tmp_path / "clone")
    result = make(clone, "demo")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "SIMULATED" in result.stdout
    # the dollars name the model whose list prices they use (the pool's endpoint), never the simulator's name
    priced = set(re.findall(r"cost if this were (\S+) at list prices", result.stdout))
    assert priced == {load_params(clone / "demo" / "params.yaml").deepconf_model.name}, priced
    assert_not_blank(clone / "demo" / "plots" / "deepconf" / "demo" / "accuracy_vs_k.png")
    # it ends with its results, one path a line relative to the clone, each made by the run
    listed = [line.strip() for line in result.stdout.split("demo: done. Its results, by method:\n")[1].splitlines()
              if line.startswith("    ")]
    assert listed and [path for path in listed if not (clone / path).is_file()] == []
    # every method's ledger, the grading critic's included, passes verify
    verified = subprocess.run([sys.executable, "-m", "tracevote", "ledger", "verify"], cwd=clone / "demo",
                              env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
    assert verified.returncode == 0, verified.stdout + verified.stderr
    checked = {line.split("/", 1)[0] for line in verified.stdout.splitlines() if line.endswith(": ok")}
    assert checked == {"pools", "debates", "critiques", "grading"}, verified.stdout
    assert run(clone, "git", "status", "--porcelain").stdout == ""


def first_sample_stored(pool_dir: Path, repro: subprocess.Popen) -> bool:
    """True once a frame log under pool_dir holds bytes; fails at once if `dvc repro` exited before that."""
    if any(p.stat().st_size for p in pool_dir.rglob("*.tvf")):
        return True
    if repro.poll() is not None:
        pytest.fail(f"`dvc repro` exited ({repro.returncode}) before storing a sample")
    return False


def test_make_repro_clears_a_dead_runs_lock_and_resumes(tmp_path: Path, venv_stamp: None,  # noqa: F811
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    # admits the probe's 3 requests and one sample; the rest wait until the kill has landed
    with watched_server(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=150), admit=4) as server:
        params = small_sim_params(backend="openai", base_url=server.base_url, needs_key=False)
        project = make_project(tmp_path / "project", params)
        shutil.copy(REPO_ROOT / "Makefile", project / "Makefile")
        copy_plots_template(tmp_path_factory, project)  # so `make repro` has nothing to set up
        pool_dir = project / "pools" / "toy"
        repro = subprocess.Popen([str(VENV / "bin" / "dvc"), "repro"], cwd=project, env=project_env(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: first_sample_stored(pool_dir, repro), "`dvc repro` to store its first sample")
        finally:
            os.killpg(repro.pid, signal.SIGKILL)  # dvc and the stage it runs, mid-build
            repro.wait()
        server.faults = FaultPlan()  # the kill has landed: the resumed run need not wait or be slow
        server.gate.release()

        rwlock = project / ".dvc" / "tmp" / "rwlock"
        assert str(repro.pid) in rwlock.read_text()
        # The killed PID gets reused by an unrelated live process: DVC now refuses to run.
        reused = sleeper()
        rwlock.write_text(rwlock.read_text().replace(f'"pid": {repro.pid}', f'"pid": {reused.pid}'))
        try:
            blocked = dvc(project, "repro", check=False)
            assert blocked.returncode != 0 and "is busy" in blocked.stderr + blocked.stdout

            resumed = make(project, "repro", "ARGS=report@toy")  # the DeepConf branch, through the killed stage
        finally:
            reused.kill()
            reused.wait()
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"left by process {reused.pid}, which is no longer running DVC" in resumed.stdout
    assert "Running stage 'report@toy'" in resumed.stdout
    assert "already holds samples; the probe it passed is not sent again" in resumed.stdout  # a partial pool
    assert '"samples": 192' in (project / "pools" / "toy.json").read_text()
