"""build_pool: kill -9 at random moments, resume, spend guard, keys, and the probe gate. The claims about its process
(the kill and the resume after it, the spend guard's refusal, the key a process inherits, its stderr a pipe) run it
as DVC does; the others in the test's own process (tests/stage_here.py)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s
from tests.dvcproject import deep_merge, model_overrides, one_dataset, project_env
from tests.sim_servers import (
    WatchedServer,
    kill_at_random_moments,
    kill_once_stored,
    refusing_urls,
    watched_server,
)
from tests.stage_here import run_stage_here
from tracevote.cli.demo import BUILTIN_PROBLEMS
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.problems import load_problems, normalize_rows
from tracevote.sampling.runner import calls_at_risk
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server
from tracevote.store.pool import Pool, Setting

pytestmark = pytest.mark.slow
N_PROBLEMS, N_POOL, CONCURRENCY = 4, 16, 4
SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=150)
# for a claim about the pool as a whole (its key, its import), not about its size or a build's course
SMALL_N_POOL = 4
SMALL_POOL: dict[str, Any] = {"pool": {"n_pool": SMALL_N_POOL}, "eval": {"k": [1, SMALL_N_POOL]},
                              "report": {"k": SMALL_N_POOL}}


def make_workdir(root: Path, base_url: str | list[str], **overrides: Any) -> Path:
    """params.yaml and data/toy.jsonl, as build_pool sees them inside a DVC project."""
    root.mkdir(parents=True, exist_ok=True)
    config = load_params(FIXTURE_PARAMS).dataset("aime_2025")
    rows = read_local_rows(BUILTIN_PROBLEMS)[:N_PROBLEMS]
    write_jsonl(root / "data" / "toy.jsonl", (p.to_record() for p in normalize_rows(rows, config, "demo")))
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    params = deep_merge(params, deep_merge({
        **one_dataset("toy", root / "data" / "toy.jsonl"),
        **model_overrides(base_url=base_url, name="tracevote-sim", needs_key=False, extra_body={}),
        "decoding": {"max_tokens": 300, "top_logprobs": 5},
        "pool": {"n_pool": N_POOL, "concurrency": CONCURRENCY, "max_retries": 6},
        "eval": {"k": [1, N_POOL]}, "report": {"k": N_POOL},
    }, overrides))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return root


def build_command() -> list[str]:
    return [sys.executable, str(REPO_ROOT / "stages" / "build_pool.py"), "--dataset", "toy",
            "--problems", "data/toy.jsonl", "--pools", "pools/toy", "--manifest", "pools/toy.json"]


def run_build(workdir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(build_command(), cwd=workdir, env=project_env(env), capture_output=True, text=True,
                          timeout=hang_guard_s())


def build_here(workdir: Path) -> subprocess.CompletedProcess:
    """run_build's stage in this process, for a claim about what it requests and stores, not about its process."""
    return run_stage_here(workdir, "build_pool.py", *build_command()[2:], check=False)


def the_pool(workdir: Path) -> Pool:
    setting = Setting.from_params(load_params(workdir / "params.yaml"))
    return Pool(workdir / "pools" / "toy" / setting.folder_name)


def pool_folder(workdir: Path) -> Path:
    """Where build_pool stores the pool `workdir`'s params.yaml asks for."""
    return workdir / "pools" / "toy" / Setting.from_params(load_params(workdir / "params.yaml")).folder_name


def stored_in(folder: Path) -> set[str]:
    """The samples stored in the pool at `folder`: what `stored` says, read without loading params.yaml again
    (~2 ms, not ~35): a test polls it every 10 ms while a build runs."""
    if not (folder / Pool.META).exists():
        return set()
    pool = Pool(folder)
    return {f"{pid}/{sid}" for pid in pool.problem_ids() for sid in pool.stored_ids(pid)}


def stored(workdir: Path) -> set[str]:
    root = workdir / "pools" / "toy"
    if not any(root.glob("*/pool.json")):
        return set()
    pool = the_pool(workdir)
    return {f"{pid}/{sid}" for pid in pool.problem_ids() for sid in pool.stored_ids(pid)}


def sample_requests(server: SimServer) -> Counter[str]:
    return Counter({k: v for k, v in server.stats.snapshot()["by_sample"].items() if not k.startswith("probe/")})


@contextlib.contextmanager
def sim_server(faults: str = "", **options: Any) -> Iterator[SimServer]:
    """The simulated model behind a loopback server with `faults` and ServerOptions(**options)."""
    server = start_server(SimModel(SIM), parse_faults(faults), ServerOptions(**options))
    try:
        yield server
    finally:
        stop_server(server)


@pytest.fixture
def slow_server() -> Iterator[WatchedServer]:
    with watched_server(SIM) as server:
        yield server


def test_kill_9_at_random_moments_then_resume(tmp_path: Path, slow_server: WatchedServer) -> None:
    workdir = make_workdir(tmp_path / "work", slow_server.base_url)
    folder = pool_folder(workdir)

    def run_until(target: int, round_number: int) -> None:
        kill_once_stored(build_command(), workdir, lambda: len(stored_in(folder)), target,
                         tmp_path / f"build-{round_number}.log")

    partial_rounds = kill_at_random_moments(slow_server, run_until, lambda: stored_in(folder),
                                            lambda: sample_requests(slow_server), total=N_PROBLEMS * N_POOL,
                                            in_flight=calls_at_risk(CONCURRENCY), seed=11)
    requests_before, before = sample_requests(slow_server), stored(workdir)
    final = run_build(workdir)
    assert final.returncode == 0, final.stderr
    assert not set(sample_requests(slow_server) - requests_before) & before
    assert partial_rounds >= 1, "no kill landed in the middle of a build; the test proved nothing"

    pool = the_pool(workdir)
    for problem in load_problems(workdir / "data" / "toy.jsonl"):
        samples = list(pool.iter_samples(problem.id))
        assert sorted(s.sample_id for s in samples) == list(range(N_POOL))
        assert all(s.n_tokens > 0 and s.top_logprobs is not None for s in samples)
        assert len(pool.read_problem(problem.id, N_POOL)) == N_POOL
    manifest = json.loads((workdir / "pools" / "toy.json").read_text())
    assert manifest["samples"] == N_PROBLEMS * N_POOL and manifest["simulated"] is True


def test_all_faults_mixed_complete_with_exact_counts(tmp_path: Path) -> None:
    with sim_server("all=0.2,retry_after_s=0.05,slow_s=0.05") as server:
        workdir = make_workdir(tmp_path / "work", server.base_url)
        result = build_here(workdir)
        assert result.returncode == 0, result.stderr
        outcomes = server.stats.snapshot()["outcomes"]
        assert sum(outcomes.get(kind, 0) for kind in ("429", "500", "503", "drop", "malformed")) > 0
        assert "retries by cause" in result.stdout
        assert len(stored(workdir)) == N_PROBLEMS * N_POOL
        again = build_here(workdir)
        assert "no request sent" in again.stdout


def test_raising_n_pool_tops_up_without_rebuilding(tmp_path: Path) -> None:
    with sim_server() as server:
        workdir = make_workdir(tmp_path / "work", server.base_url, pool={"n_pool": 4}, eval={"k": [1, 4]},
                               report={"k": 4})
        built = run_build(workdir)
        assert built.returncode == 0
        # backend openai, but the simulator answered: the dollars say what they are
        summary = [line for line in built.stdout.splitlines() if line.startswith("stored ")]
        assert summary and summary[-1].endswith("(SIMULATED: nothing was spent)"), built.stdout
        # stderr is a pipe, not a terminal: the progress bar wrote whole lines, no carriage-return redraws
        assert "\r" not in built.stderr and "build_pool: 100%" in built.stderr, built.stderr
        first = sample_requests(server)
        params = yaml.safe_load((workdir / "params.yaml").read_text())
        params["pool"]["n_pool"] = 6
        (workdir / "params.yaml").write_text(yaml.safe_dump(params))
        assert build_here(workdir).returncode == 0
        added = set(sample_requests(server) - first)
        assert added == {f"{pid}/{sid}" for pid in the_pool(workdir).problem_ids() for sid in (4, 5)}


def test_over_budget_build_is_refused_before_any_request(tmp_path: Path) -> None:
    with sim_server() as server:
        workdir = make_workdir(tmp_path / "work", server.base_url, pool={"max_cost_usd": 0.001})
        result = run_build(workdir)
        assert result.returncode == 2
        assert "refusing to build" in result.stderr and "pool.max_cost_usd" in result.stderr
        assert server.stats.snapshot()["requests"] == 0


def test_missing_key_fails_at_once_and_complete_pool_needs_none(tmp_path: Path) -> None:
    with sim_server(api_key="sk-canary-5f0c1e") as server:
        # the loopback server stands in for DeepSeek: a gateway trusted with DeepSeek's key; a small pool, every
        # problem's log still written (where a leaked key would be)
        workdir = make_workdir(tmp_path / "work", server.base_url, **SMALL_POOL,
                               endpoints={"deepseek": {"needs_key": True, "allow_foreign_key": True}})
        result = run_build(workdir)
        assert result.returncode == 2
        assert "DEEPSEEK_API_KEY" in result.stderr and "dvc pull" in result.stderr
        assert server.stats.snapshot()["requests"] == 0

        assert run_build(workdir, {"DEEPSEEK_API_KEY": "sk-canary-5f0c1e"}).returncode == 0
        complete = run_build(workdir)  # no key in the environment now
        assert complete.returncode == 0 and "no request sent" in complete.stdout

        leaked = [p for p in workdir.rglob("*") if p.is_file() and b"sk-canary-5f0c1e" in p.read_bytes()]
        assert leaked == []


def test_sentinel_only_logprobs_are_refused_by_the_probe(tmp_path: Path) -> None:
    with sim_server() as server:
        # DeepSeek at temperature 0 reports 0.0 for the chosen token and -9999 for the rest
        workdir = make_workdir(tmp_path / "work", server.base_url, decoding={"temperature": 0.0})
        result = build_here(workdir)
        assert result.returncode == 2
        assert "no usable confidence signal" in result.stderr
        assert sample_requests(server) == Counter()


def test_non_retryable_error_stops_the_build_at_once(tmp_path: Path) -> None:
    with sim_server(no_balance=True) as server:
        workdir = make_workdir(tmp_path / "work", server.base_url)
        result = build_here(workdir)
        assert result.returncode == 2
        assert "402" in result.stderr
        assert server.stats.snapshot()["requests"] <= 3 + CONCURRENCY



def tracevote(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracevote", *args], cwd=workdir, env=project_env(),
                          capture_output=True, timeout=hang_guard_s())


def test_an_imported_pool_is_complete_for_build_pool(tmp_path: Path) -> None:
    with sim_server() as server:
        source = make_workdir(tmp_path / "source", server.base_url, **SMALL_POOL)
        assert build_here(source).returncode == 0
        exported = tracevote(source, "pool", "export")
        assert exported.returncode == 0, exported.stderr
        (tmp_path / "samples.jsonl").write_bytes(exported.stdout)
        assert len(exported.stdout.splitlines()) == N_PROBLEMS * SMALL_N_POOL

        target = make_workdir(tmp_path / "target", server.base_url, **SMALL_POOL)
        imported = tracevote(target, "pool", "import", str(tmp_path / "samples.jsonl"))
        assert imported.returncode == 0, imported.stderr
        assert b"SIMULATED" in imported.stdout  # the sim's samples say so in the interchange file
        requests_before = sample_requests(server)
        result = build_here(target)
        assert result.returncode == 0 and "no request sent" in result.stdout
        assert sample_requests(server) == requests_before
        assert json.loads((target / "pools" / "toy.json").read_text())["simulated"] is True


def test_several_endpoints_share_the_build_and_failing_ones_are_set_aside(tmp_path: Path) -> None:
    with sim_server() as first, sim_server() as second, sim_server("500=1.0,max_per_sample=1000000") as failing, \
            refusing_urls() as (refusing,):
        endpoints = [refusing, first.base_url, failing.base_url, second.base_url]
        workdir = make_workdir(tmp_path / "work", endpoints)
        result = build_here(workdir)
        assert result.returncode == 0, result.stdout + result.stderr
        delivered = [Counter(server.stats.snapshot()["delivered"]) for server in (first, second, failing)]

    total = N_PROBLEMS * N_POOL
    assert len(stored(workdir)) == total
    by_sample = [Counter({k: n for k, n in d.items() if not k.startswith("probe/")}) for d in delivered]
    assert by_sample[0] + by_sample[1] == Counter(stored(workdir))  # each sample delivered once, all stored
    counts = [sum(d.values()) for d in by_sample]
    assert counts[2] == 0 and min(counts[:2]) >= total // 4, f"the load was not spread: {counts}"
    report = result.stdout[result.stdout.index("endpoints:"):]
    for url in (endpoints[0], endpoints[2]):
        assert re.search(rf"{re.escape(url)}: 0 served, \d+ failed .*set aside", report), report
    for url in (endpoints[1], endpoints[3]):
        assert re.search(rf"{re.escape(url)}: \d+ served, 0 failed\n", report + "\n"), report

    single = make_workdir(tmp_path / "single", endpoints[1])
    folders = [Setting.from_params(load_params(w / "params.yaml")).folder_name for w in (single, workdir)]
    assert folders[0] == folders[1]  # the setting, and so the pool, does not depend on the endpoints


def test_a_pool_from_a_server_with_a_reasoning_parser_scores_as_one_without(tmp_path: Path) -> None:
    """build_pool against the simulator with and without its reasoning parser: the same tokens' confidences and
    the same answers, the thinking kept beside the content (docs/endpoints.md, split thinking)."""
    pools = {}
    for parser in (None, "reasoning_content"):
        with sim_server(reasoning_parser=parser) as server:
            workdir = make_workdir(tmp_path / str(parser), server.base_url, pool={"n_pool": 4}, eval={"k": [1, 4]},
                                   report={"k": 4})
            assert build_here(workdir).returncode == 0
        pools[parser] = the_pool(workdir)
    plain, split = pools[None], pools["reasoning_content"]
    for problem_id in plain.problem_ids():
        a, b = plain.read_problem(problem_id, 4), split.read_problem(problem_id, 4)
        np.testing.assert_array_equal(a.token_confidence, b.token_confidence)
        np.testing.assert_array_equal(a.offsets, b.offsets)
        assert a.candidates == b.candidates and a.finish_reasons == b.finish_reasons
        whole, parted = list(plain.iter_samples(problem_id)), list(split.iter_samples(problem_id))
        assert all(s.reasoning == "" for s in whole) and all(s.reasoning for s in parted)
        assert [s.reasoning + s.text for s in parted] == [s.text for s in whole]
