"""Run control in the paid stages, through build_pool against a real loopback sim server whose request counts are
read server-side: the outage breaker, the spend cap at run time, the free-space check, the probe's "model does not
exist" and a resumed build that sends no probe. build_pool runs as a subprocess for the outage breaker, the 429s,
another build's lock and the full disk (its exit and one line on stderr, as DVC shows them), and for the spend cap at
run time (its calls all counted once it exits); the other runs, setup
builds among them, in the test's own process (tests/stage_here.py), their exit code and lines read alike."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s
from tests.dvcproject import one_dataset, project_env, update_endpoint
from tests.sim_servers import requests_by_key
from tests.stage_here import run_stage_here
from tracevote.cli.demo import with_overrides
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.costs import money
from tracevote.core.errors import StorageError
from tracevote.sampling.breaker import LONG_LIMIT_ATTEMPTS, OUTAGE_ATTEMPTS
from tracevote.sampling.paid import check_free_space
from tracevote.sampling.runner import calls_at_risk
from tracevote.sim.faults import FaultPlan, parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, start_server, stop_server
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample

N_PROBLEMS = 12
CONCURRENCY = 16
PROBE_REQUESTS = 3  # run_probe's n_requests on one endpoint


@contextlib.contextmanager
def sim_server(mean_tokens: int = 60, **options: Any) -> Iterator[SimServer]:
    sim = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=mean_tokens)
    server = start_server(SimModel(sim), FaultPlan(), ServerOptions(**options))
    try:
        yield server
    finally:
        stop_server(server)


def project(root: Path, base_url: str, *, n_pool: int, max_tokens: int = 64, max_cost_usd: float = 10.0,
            output_fraction: float = 1.0, name: str = "deepseek-v4-flash") -> Path:
    """params.yaml pointing at `base_url` and data/toy.jsonl with N_PROBLEMS problems."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    update_endpoint(params, needs_key=False, extra_body={}, backend="openai", base_url=base_url, name=name)
    params = with_overrides(params, one_dataset("toy", root / "data" / "toy.jsonl"))
    params["decoding"].update({"max_tokens": max_tokens, "top_logprobs": 5})
    params["pool"].update({"n_pool": n_pool, "concurrency": CONCURRENCY, "max_retries": 8,
                           "max_cost_usd": max_cost_usd})
    params["endpoints"]["deepseek"]["pricing"]["expected_output_fraction"] = output_fraction
    params["eval"]["k"] = [1]
    params["report"]["k"] = 1
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    (root / "data").mkdir(exist_ok=True)
    problems = [{"id": f"toy-{i:02d}", "problem": f"Find {i} + 25.", "answer": i + 25} for i in range(N_PROBLEMS)]
    (root / "data" / "toy.jsonl").write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in problems))
    return root


def build_pool(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """stages/build_pool.py on the toy dataset, in `cwd`, with `env` added to the project's environment."""
    command = [sys.executable, str(REPO_ROOT / "stages" / "build_pool.py"), "--params", "params.yaml",
               "--dataset", "toy", "--problems", "data/toy.jsonl", "--pools", "pools/toy",
               "--manifest", "pools/toy.json"]
    return subprocess.run(command, cwd=cwd, env={**project_env(), **env}, capture_output=True, text=True,
                          timeout=hang_guard_s())


def build_pool_here(cwd: Path) -> subprocess.CompletedProcess[str]:
    """build_pool's run in this process, for a claim about what it sends and says, not about its process."""
    return run_stage_here(cwd, "build_pool.py", "--params", "params.yaml", "--dataset", "toy", "--problems",
                          "data/toy.jsonl", "--pools", "pools/toy", "--manifest", "pools/toy.json", check=False)


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def requests_sent(server: SimServer) -> int:
    return sum(requests_by_key(server).values())


def probe_requests(server: SimServer) -> int:
    return sum(count for key, count in requests_by_key(server).items() if key.startswith("probe/"))


@pytest.fixture(scope="module")
def first_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pool holding one sample per problem (so it has passed the probe), built once for the file's tests."""
    root = tmp_path_factory.mktemp("first-build")
    with sim_server() as server:
        first = build_pool_here(project(root, server.base_url, n_pool=1))
        probes = probe_requests(server)
    assert first.returncode == 0, first.stderr
    assert probes == PROBE_REQUESTS  # it probed, once
    return root


def started_pool(tmp_path: Path, server: SimServer, first_build: Path) -> Path:
    """A copy of the first build, then asked for 8 per problem of `server` (the pool's setting names no server:
    its first probe went to the first build's, none to this one)."""
    shutil.copytree(first_build, tmp_path, symlinks=True, dirs_exist_ok=True)
    return project(tmp_path, server.base_url, n_pool=8)


@pytest.mark.parametrize(("usd", "expected"), [
    (0.0075, "$0.0075"), (0.0155, "$0.0155"), (0.00012345, "$0.00012"), (0.5, "$0.5000"), (0.99999, "$1.0000"),
    (1.0, "$1.00"), (12.345, "$12.35"), (1234.5, "$1,234.50"), (0.0, "$0"),
    (2.4e-19, "$0"), (-1e-17, "$0"), (2.8e-8, "$0.000000028")])  # a float's residue; one token at $0.028/M
def test_money_keeps_the_precision_a_small_amount_needs(usd: float, expected: str) -> None:
    assert money(usd) == expected


def test_a_full_outage_trips_the_breaker_after_a_bounded_number_of_requests(tmp_path: Path, first_build: Path) -> None:
    with sim_server() as server:
        root = started_pool(tmp_path, server, first_build)
        before = requests_sent(server)
        # each 503 asks to wait 0.05 s: the bound on attempts, not the client's growing backoff, is under test
        server.faults = parse_faults("503=1.0,max_per_sample=1000000,retry_after_s=0.05,overloaded_retry_after=1")
        result = build_pool(root)
        sent = requests_sent(server) - before
        probes = probe_requests(server)
    line = error_line(result)
    assert f"HTTP 503 x{OUTAGE_ATTEMPTS} on {OUTAGE_ATTEMPTS} consecutive attempts over 1 endpoint" in line
    assert "stopped sending" in line and "Run the stage again" in line
    # every attempt after the trip is refused before it is sent; those already on the wire may land
    assert OUTAGE_ATTEMPTS <= sent <= OUTAGE_ATTEMPTS + CONCURRENCY, sent
    assert probes == 0  # the resumed build did not probe again


@pytest.mark.parametrize("started", [False, True], ids=["fresh build: in the probe", "resumed build"])
def test_a_429_asking_for_a_day_ends_the_build_within_a_bounded_number_of_requests(
        tmp_path: Path, started: bool, first_build: Path) -> None:
    with sim_server() as server:
        root = started_pool(tmp_path, server, first_build) if started else project(tmp_path, server.base_url, n_pool=8)
        before = requests_sent(server)
        server.faults = parse_faults("429=1.0,retry_after_s=86400,max_per_sample=1000000")
        result = build_pool(root)  # the old client waited 30 s a time, 9 times a call: minutes, not seconds
        sent = requests_sent(server) - before
    line = error_line(result)
    assert line.startswith(f"error: rate limited: HTTP 429 on {LONG_LIMIT_ATTEMPTS} attempts in a row over 1 "
                           f"endpoint for "), line
    assert "the last asking to wait 24 h (Retry-After: 86400)" in line
    assert "Run the stage again once the limit lifts" in line and "what is missing" in line
    # the probe and a resumed build's first call go one at a time: the breaker trips at exactly the bound
    assert sent == LONG_LIMIT_ATTEMPTS, sent
    if started:
        assert "(0 samples received by this run are stored)" in line
        assert f"HTTP 429, {LONG_LIMIT_ATTEMPTS - 1} in a row, the server asks for 86400 s" in result.stderr
    else:
        assert "attempt 2/9 failed (HTTP 429)" in result.stderr  # the probe's retries, before any progress bar


def test_an_empty_balance_stops_the_build_at_its_first_request(tmp_path: Path, first_build: Path) -> None:
    with sim_server() as server:
        root = started_pool(tmp_path, server, first_build)
        before = requests_sent(server)
        server.options = dataclasses.replace(server.options, no_balance=True)
        result = build_pool_here(root)
        sent = requests_sent(server) - before
    line = error_line(result)
    assert "HTTP 402, out of quota or balance: Insufficient Balance" in line and "stopped at once" in line, line
    assert sent == 1


def test_bursts_shorter_than_the_breaker_do_not_trip_it(tmp_path: Path, first_build: Path) -> None:
    with sim_server() as server:
        root = started_pool(tmp_path, server, first_build)
        # each 503 asks to wait 0.01 s: the breaker's bound, not the client's growing backoff, is under test
        server.faults = parse_faults("503=0.5,max_per_sample=3,retry_after_s=0.01,overloaded_retry_after=1")
        result = build_pool_here(root)
    assert result.returncode == 0, result.stderr
    assert "retries by cause: HTTP 503" in result.stdout


def test_the_spend_cap_holds_at_run_time_though_the_estimate_was_under_it(tmp_path: Path) -> None:
    # outputs near max_tokens, estimated at 1% of it: the estimate passes a cap the run would overshoot
    cap = 0.0023  # about 4 worst-case calls of 2000 output tokens at $0.28/M
    with sim_server(mean_tokens=1500) as server:
        root = project(tmp_path, server.base_url, n_pool=2, max_tokens=2000, max_cost_usd=cap,
                       output_fraction=0.01)
        # a process: every call it started has reached the server once it exits, so sent + not sent is the whole
        # pool (in this process, a call still in flight when the stage returns could be counted by neither)
        result = build_pool(root)
        samples = requests_sent(server) - probe_requests(server)
    line = error_line(result)
    match = re.search(r"spent \$([0-9.]+) of \$0\.0023\b.* (\d+) calls not sent", line)
    assert match is not None, line
    assert float(match.group(1)) <= cap
    assert samples + int(match.group(2)) == 2 * N_PROBLEMS
    assert "Raise pool.max_cost_usd in params.yaml" in line


def test_a_model_the_server_lacks_is_reported_as_such_not_as_an_uninformative_probe(tmp_path: Path) -> None:
    with sim_server(models=("deepseek-v4-flash",)) as server:
        result = build_pool_here(project(tmp_path, server.base_url, n_pool=1, name="deepseek-chat"))
    line = error_line(result)
    assert "model 'deepseek-chat' not found: Model Not Exist. Check endpoints.deepseek.name" in line
    assert "confidence signal" not in line


def test_a_resumed_build_sends_no_probe(tmp_path: Path, first_build: Path) -> None:
    with sim_server() as server:
        root = started_pool(tmp_path, server, first_build)
        result = build_pool_here(root)
        probes = probe_requests(server)
    assert result.returncode == 0, result.stderr
    assert probes == 0  # the first build's probe went to its own server; none here


def test_a_second_build_of_a_pool_meets_the_first_ones_lock_before_its_probe(tmp_path: Path) -> None:
    with sim_server() as server:
        root = project(tmp_path, server.base_url, n_pool=8)
        setting = Setting.from_params(load_params(root / "params.yaml"))
        pool = Pool.open_or_create(root / "pools" / "toy", setting, simulated=False)
        with pool.exclusive():  # what a running build holds from before its probe to its end
            result = build_pool(root)
        sent = requests_sent(server)
    line = error_line(result)
    assert f"pools/toy/{setting.folder_name}: another process is running a stage on this pool" in line, line
    assert "nothing was sent" in line
    assert sent == 0  # not even the probe
    assert (pool.root / Pool.META).is_file()  # and the first build's pool is left as it was


def test_too_little_free_space_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    folder = tmp_path / "pools" / "toy"  # not created yet: its nearest existing parent's disk is measured
    with pytest.raises(StorageError, match=r"pools/toy: only [0-9.]+ MiB free.*nothing was sent"):
        check_free_space(folder, 2**62)
    check_free_space(folder, 1)
    assert not folder.exists()


# what makes a child process measure coverage: coverage's own `patch = subprocess` and COVERAGE_PROCESS_START, and
# the COV_CORE_* variables of pytest-cov before version 7
COVERAGE_SUBPROCESS_VARIABLES = ("COVERAGE_PROCESS_", "COV_CORE_")


def build_pool_under_size_limit(cwd: Path, max_file_bytes: int) -> subprocess.CompletedProcess[str]:
    """build_pool with every file it writes limited to `max_file_bytes` (RLIMIT_FSIZE, SIGXFSZ ignored so the
    write fails with EFBIG instead of killing the process): a full disk any user can make."""
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    command = [sys.executable, str(REPO_ROOT / "stages" / "build_pool.py"), "--params", "params.yaml",
               "--dataset", "toy", "--problems", "data/toy.jsonl", "--pools", "pools/toy",
               "--manifest", "pools/toy.json"]
    # out of coverage's reach: the limit would cap its data file too, and its save fail at exit with a traceback
    env = {name: value for name, value in project_env().items() if not name.startswith(COVERAGE_SUBPROCESS_VARIABLES)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=hang_guard_s(),
                          preexec_fn=limited)


def the_pool(root: Path) -> Pool:
    return Pool(next((root / "pools" / "toy").rglob(Pool.META)).parent)


def pool_samples(root: Path) -> dict[str, list[tuple]]:
    """Every stored sample by problem, in sample order, as what a model decides (arrival order and latency vary)."""
    pool = the_pool(root)

    def decided(sample: Sample) -> tuple:
        return (sample.sample_id, sample.text, sample.tokens, sample.token_logprobs.tobytes(), sample.answer,
                sample.finish_reason, sample.prompt_tokens, sample.completion_tokens)

    return {pid: sorted(map(decided, pool.iter_samples(pid))) for pid in pool.problem_ids()}


def test_a_write_refused_partway_stops_the_run_and_a_rerun_completes_identically(
        tmp_path: Path, first_build: Path) -> None:
    (tmp_path / "clean").mkdir()
    (tmp_path / "full").mkdir()
    with sim_server() as server:
        clean = project(tmp_path / "clean", server.base_url, n_pool=8)
        assert build_pool_here(clean).returncode == 0
        limit = max(path.stat().st_size for path in the_pool(clean).root.rglob("*.tvf")) // 2
        root = started_pool(tmp_path / "full", server, first_build)
        before = requests_sent(server)
        full = build_pool_under_size_limit(root, limit)
        sent = requests_sent(server) - before
        stored = sum(len(the_pool(root).stored_ids(pid)) for pid in the_pool(root).problem_ids()) - N_PROBLEMS
        rerun = build_pool_here(root)
    line = error_line(full)
    assert "pools/toy/" in line and "MiB free" in line, line
    assert stored < 7 * N_PROBLEMS  # the limit struck partway
    accounted = re.search(r"Of the (\d+) paid replies that landed once the disk refused, (\d+) were stored on a "
                          r"second try and (\d+) could not be \(the rerun requests those again\)", line)
    assert accounted is not None, line
    kept, stored_late, lost = map(int, accounted.groups())
    assert kept == stored_late + lost and lost <= calls_at_risk(CONCURRENCY), line
    assert sent == stored + lost, (sent, stored, lost)  # every paid reply is stored, or counted in the line
    assert rerun.returncode == 0, rerun.stderr
    assert pool_samples(root) == pool_samples(clean)


@contextlib.contextmanager
def small_disk(where: Path, size_mib: int) -> Iterator[Path]:
    """A tmpfs of `size_mib` mounted at `where` for the block; skips where mounting is not permitted (not root,
    no CAP_SYS_ADMIN, or no tmpfs)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(where)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'}): needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_rerun_on_a_still_full_disk_sends_nothing(tmp_path: Path, first_build: Path) -> None:
    with sim_server() as server, small_disk(tmp_path / "disk", 20) as disk:
        root = started_pool(disk, server, first_build)  # the first build fitted; now the disk fills up
        free = shutil.disk_usage(disk).free
        (disk / "filler").write_bytes(b"\0" * (free - 2**20))  # 1 MiB left: under MIN_FREE_BYTES
        before = requests_sent(server)
        result = build_pool(root)
        sent = requests_sent(server) - before
    line = error_line(result)
    assert "pools/toy/" in line and "only 1.0 MiB free" in line and "nothing was sent" in line, line
    assert sent == 0
