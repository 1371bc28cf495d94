"""Every paid stage, against a server whose rate limit never lifts or whose account is out of quota: one line, a
bounded number of requests (the four stages share the client, its breaker and its quota rule)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.dvcproject import model_overrides, update_params
from tests.sampling.test_rate_limits import DAILY_LIMIT, DEEPSEEK_BALANCE, OPENAI_QUOTA, counting_server
from tests.test_hostile_ids import PAID_STAGES, run_paid_stages, run_paid_stages_here, write_stage_inputs
from tracevote.sampling.breaker import LONG_LIMIT_ATTEMPTS

IDS = ["p1", "p2", "p3"]
CONCURRENCY = 4  # each stage's, from test_hostile_ids.stage_params


def pointed_at(project: Path, base_url: str) -> Path:
    """The hostile-ids project (three problems, tiny builds of every method) with its endpoints at `base_url`."""
    write_stage_inputs(project, IDS)
    served = {"base_url": base_url, "needs_key": False, "extra_body": {}}
    update_params(project, model_overrides(backend="openai", **served))
    update_params(project, model_overrides("qwen", **served))  # build_pool_model's
    return project


# how each stage runs: build_pool as a process, as DVC runs it; the others in this process, the same scripts with the
# same command lines (tests/test_hostile_ids.py's run_paid_stages_here): the client, its breaker and its quota rule
# are one for all, and each test's server counts what its stage sent
RUNS = {stage: "process" if stage == "build_pool" else "here" for stage in PAID_STAGES}


def run_stage(project: Path, stage: str, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> subprocess.CompletedProcess[str]:
    if RUNS[stage] == "here":
        return run_paid_stages_here(project, monkeypatch, capsys, [stage])[stage]
    return run_paid_stages(project, [stage])[stage]


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    return line


@pytest.mark.parametrize("stage", list(PAID_STAGES), ids=lambda stage: f"{stage}-{RUNS[stage]}")
def test_a_429_asking_for_a_day_stops_every_paid_stage_within_a_bounded_number_of_requests(
        tmp_path: Path, stage: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with counting_server(*DAILY_LIMIT) as server:
        result = run_stage(pointed_at(tmp_path, server.base_url), stage, monkeypatch, capsys)
        sent = sum(server.by_key.values())
    line = one_error_line(result)
    assert line.startswith("error: rate limited: HTTP 429 on ") and "Retry-After: 86400" in line, line
    assert "Run the stage again once the limit lifts" in line
    # the breaker trips at the bound; requests already on the wire when it trips still land
    assert LONG_LIMIT_ATTEMPTS <= sent <= LONG_LIMIT_ATTEMPTS + CONCURRENCY, sent


@pytest.mark.parametrize("stage", list(PAID_STAGES), ids=lambda stage: f"{stage}-{RUNS[stage]}")
@pytest.mark.parametrize("refusal", [OPENAI_QUOTA, DEEPSEEK_BALANCE], ids=["insufficient_quota", "402"])
def test_an_empty_quota_stops_every_paid_stage_with_at_most_one_request_per_call(
        tmp_path: Path, stage: str, refusal: tuple, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with counting_server(*refusal) as server:
        result = run_stage(pointed_at(tmp_path, server.base_url), stage, monkeypatch, capsys)
        by_key = dict(server.by_key)
    line = one_error_line(result)
    assert f"HTTP {refusal[0]}, out of quota or balance" in line and "stopped at once" in line, line
    assert by_key and max(by_key.values()) == 1, by_key
    assert sum(by_key.values()) <= CONCURRENCY, by_key  # the calls already sent when the first refusal came back
