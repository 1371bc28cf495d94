"""`dvc exp run --queue` (and `--temp`) run stages in a checkout under .dvc/tmp/exps/ that holds only git-tracked
files, so the git-ignored .env is not there: the missing-key line says so and how to give the queue the key, and
`--copy-paths .env` (documented in docs/experiments.md and docs/endpoints.md) does."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import BIN_DIR, dvc, make_project, project_env, run
from tests.test_pipeline import small_sim_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.faults import FaultPlan
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server

pytestmark = pytest.mark.slow
KEY = "sk-canary-queue-7d2e"


@contextlib.contextmanager
def keyed_server() -> Iterator[SimServer]:
    """A loopback server that answers only requests bearing KEY (401 otherwise)."""
    server = start_server(SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)), FaultPlan(),
                          ServerOptions(api_key=KEY))
    try:
        yield server
    finally:
        stop_server(server)


def keyed_project(root: Path, base_url: str) -> Path:
    """A committed project whose endpoint needs DEEPSEEK_API_KEY, given only in the git-ignored .env."""
    params = small_sim_params(backend="openai", base_url=base_url, needs_key=True)
    params["pool"] = {"n_pool": 2, "concurrency": 4}
    params["eval"]["k"], params["report"]["k"] = [1, 2], 2  # within the pool: paid stages check every key
    params["endpoints"]["deepseek"]["allow_foreign_key"] = True  # DeepSeek's key, sent to this loopback server
    project = make_project(root, params)
    (project / ".env").write_text(f"DEEPSEEK_API_KEY={KEY}\n")
    assert run(project, "git", "check-ignore", ".env").returncode == 0  # the project's .gitignore keeps it out
    return project


def run_all_queued(project: Path, log: Path) -> tuple[int, str]:
    """`dvc exp run --run-all`: (its exit code, its output). The queue worker it spawns inherits its stdout and stderr
    and lives on until its queue has been empty for 10 s; with pipes, reading to their end would wait for the worker
    too. A file lets this return when dvc exits, once it has collected the experiment."""
    with log.open("w") as output:
        done = subprocess.run([str(BIN_DIR / "dvc"), "exp", "run", "--run-all"], cwd=project, env=project_env(),
                              stdout=output, stderr=subprocess.STDOUT, timeout=hang_guard_s())
    return done.returncode, log.read_text()


def test_a_dvc_temporary_workspace_lacks_dotenv_until_it_is_copied_in(tmp_path: Path) -> None:
    with keyed_server() as server:
        project = keyed_project(tmp_path / "project", server.base_url)
        without = dvc(project, "exp", "run", "--temp", "build_pool@toy", check=False)
        sent_without = server.stats.snapshot()["requests"]
        dvc(project, "exp", "run", "--queue", "--copy-paths", ".env", "build_pool@toy")
        copied, copied_output = run_all_queued(project, tmp_path / "run-all.log")  # starts a queue worker
    assert without.returncode != 0
    output = without.stdout + without.stderr
    assert "no API key is set for endpoint deepseek" in output and "Traceback" not in output
    assert "This stage runs in a DVC temporary workspace (dvc exp run --queue or --temp)" in output
    assert f"so {project / '.env'} is not here" in output and "--copy-paths .env" in output
    assert sent_without == 0
    assert copied == 0, copied_output
    # `dvc queue status`'s verdict, from the same result: --run-all names an experiment as ran only once its result
    # is collected, and names each that failed
    assert "Ran experiment(s)" in copied_output and "Failed to reproduce" not in copied_output, copied_output
    leaked = [p for p in project.rglob("*") if p.is_file() and p.name != ".env" and KEY.encode() in p.read_bytes()]
    assert leaked == []
