"""What a user sees when the endpoint is wrong, through the real entry points run as subprocesses:
one line naming the endpoint and the cause, retries counted as they happen, no traceback; and
simulated builds whose dollar figures say nothing was spent."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, hang_guard_s
from tests.dvcproject import one_dataset, project_env, update_endpoint
from tests.sampling.test_run_control import build_pool
from tests.sim_servers import refusing_urls
from tracevote.cli.demo import with_overrides
from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.faults import FaultPlan
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, start_server, stop_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)
PROBLEMS = [{"id": "toy-01", "problem": "Find 17 + 25.", "answer": 42},
            {"id": "toy-02", "problem": "Find 6 x 7.", "answer": 42}]


def workdir(root: Path, **model: Any) -> Path:
    """params.yaml (the tests' fixture with `model` changed) and data/toy.jsonl in `root`."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    update_endpoint(params, **{"needs_key": False, "extra_body": {}, **model})
    params = with_overrides(params, one_dataset("toy", root / "data" / "toy.jsonl"))
    params["decoding"].update({"max_tokens": 64, "top_logprobs": 5})
    params["pool"].update({"n_pool": 2, "concurrency": 2})
    params["eval"]["k"] = [1, 2]
    params["report"]["k"] = 2
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (root / "data").mkdir()
    (root / "data" / "toy.jsonl").write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in PROBLEMS))
    return root


def tracevote(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracevote", *args, "--params", "params.yaml"], cwd=cwd,
                          env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())



@contextlib.contextmanager
def sim_server(**options: Any) -> Iterator[str]:
    server = start_server(SimModel(SIM), FaultPlan(), ServerOptions(**options))
    try:
        yield server.base_url
    finally:
        stop_server(server)


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one `error: ...` line, after checking there is exactly one and no traceback."""
    assert "Traceback" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.mark.parametrize("command", ["probe", "build_pool"])
def test_a_refused_endpoint_is_one_line_naming_it_and_the_cause(tmp_path: Path, command: str) -> None:
    with refusing_urls() as (endpoint,):
        cwd = workdir(tmp_path, base_url=endpoint)
        result = tracevote(cwd, "probe") if command == "probe" else build_pool(cwd)
    assert result.returncode == 2
    assert error_line(result).startswith(f"error: cannot connect to {endpoint}/chat/completions: connection "
                                         f"refused (gave up after 3 attempts). Check endpoints.deepseek.base_url")
    assert f"connecting to {endpoint}/chat/completions: attempt 1/3 failed (connection refused), " \
           f"retrying in " in result.stderr
    assert "attempt 2/3 failed (connection refused)" in result.stderr
    # a first build that stored nothing leaves no empty pool in the DVC-tracked pools/ (nor pools/ itself)
    assert not (cwd / "pools").exists(), sorted(str(p.relative_to(cwd)) for p in (cwd / "pools").rglob("*"))


def test_an_unresolvable_host_says_so(tmp_path: Path) -> None:
    endpoint = "http://no-such-host.invalid"  # .invalid never resolves (RFC 2606)
    result = tracevote(workdir(tmp_path, base_url=endpoint), "probe")
    assert result.returncode == 2
    assert error_line(result).startswith(f"error: cannot connect to {endpoint}/chat/completions: name not resolved")


def test_a_wrong_path_points_at_base_url(tmp_path: Path) -> None:
    with sim_server() as base_url:
        result = tracevote(workdir(tmp_path, base_url=f"{base_url}/v2"), "probe")
    assert result.returncode == 2
    line = error_line(result)
    assert line.startswith(f"error: the endpoint {base_url}/v2/chat/completions answered 404")
    assert "check endpoints.deepseek.base_url" in line and "/v1/chat/completions" in line
    assert "https://api.deepseek.com" in line
    assert "model.name" not in line


def test_an_unknown_model_points_at_model_name(tmp_path: Path) -> None:
    with sim_server(models=("deepseek-v4-flash",)) as base_url:
        result = tracevote(workdir(tmp_path, base_url=base_url, name="deepseek-chat"), "probe")
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "model found:       no" in result.stdout
    assert "model 'deepseek-chat' not found: Model Not Exist. Check endpoints.deepseek.name" in result.stdout
    assert "model.base_url" not in result.stdout


def test_a_simulated_build_says_its_dollars_were_not_spent(tmp_path: Path) -> None:
    result = build_pool(workdir(tmp_path, backend="sim", name="deepseek-v4-flash"))
    assert result.returncode == 0, result.stderr
    assert "cost if this were deepseek-v4-flash at list prices (checked 2026-07): ~$" in result.stdout
    assert "(SIMULATED: nothing will be spent)" in result.stdout
    summary = result.stdout.splitlines()[-1]
    assert summary.startswith("stored 4 of 4 requested samples")
    assert "cost if this were deepseek-v4-flash at list prices: ~$" in summary
    assert summary.endswith("(SIMULATED: nothing was spent)")
    assert "SIMULATED: nothing was spent" in result.stderr  # the progress bar
