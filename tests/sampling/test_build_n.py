"""build_pool with pool.samples_per_request (`n` choices in one request), against the simulator: the same pool
trace for trace as without n, a partly failed reply losing only its failed choices, engines that ignore n found by
the probe, kill -9 losing at most the requests in flight. The kill and the resume after it run build_pool as a
process, as DVC does; the other claims are about what is requested and stored, so their builds run in the test's
own process (tests/stage_here.py)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import hang_guard_s
from tests.dvcproject import project_env
from tests.sampling.test_build import (
    CONCURRENCY,
    N_POOL,
    N_PROBLEMS,
    SIM,
    build_command,
    build_here,
    make_workdir,
    pool_folder,
    run_build,
    sample_requests,
    sim_server,
    stored,
    stored_in,
    the_pool,
)
from tests.sim_servers import kill_at_random_moments, kill_once_stored, watched_server
from tracevote.sampling.runner import calls_at_risk
from tracevote.sim.server import ServerOptions, SimServer
from tracevote.store.records import Sample

pytestmark = pytest.mark.slow
PER_REQUEST = 4
LOCAL = {"endpoints": {"deepseek": {"profile": "local"}}}  # vLLM's rules: n honoured


def with_n(per_request: int = PER_REQUEST, **overrides: object) -> dict[str, object]:
    return {**LOCAL, "pool": {"samples_per_request": per_request}, **overrides}


def traces(workdir: Path) -> dict[tuple[str, int], Sample]:
    pool = the_pool(workdir)
    return {(s.problem_id, s.sample_id): s for pid in pool.problem_ids() for s in pool.iter_samples(pid)}


def assert_same_traces(ours: dict[tuple[str, int], Sample], theirs: dict[tuple[str, int], Sample]) -> None:
    assert ours.keys() == theirs.keys() and len(ours) == N_PROBLEMS * N_POOL
    for key, sample in ours.items():
        other = theirs[key]
        assert (sample.text, sample.tokens, sample.answer, sample.finish_reason) == (
            other.text, other.tokens, other.answer, other.finish_reason), key
        np.testing.assert_array_equal(sample.token_logprobs, other.token_logprobs)
        np.testing.assert_array_equal(sample.top_logprobs, other.top_logprobs)


def header_keys(server: SimServer) -> Counter[str]:
    return sample_requests(server)


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], Sample]:
    """The pool built one trace a request (no n) from a fault-free server: what every build with n must equal.
    Built once for the tests that compare with it (the simulator's traces depend on its seed and the sample key
    alone, never on which server instance answers)."""
    with sim_server(profile="local") as server:
        workdir = make_workdir(tmp_path_factory.mktemp("alone"), server.base_url, **LOCAL)
        built = build_here(workdir)
        assert built.returncode == 0, built.stderr
    return traces(workdir)


def test_the_same_pool_trace_for_trace_with_n_and_without(tmp_path: Path,
                                                           alone: dict[tuple[str, int], Sample]) -> None:
    with sim_server(profile="local") as server:
        workdir = make_workdir(tmp_path / "shared", server.base_url, **with_n())
        built = build_here(workdir)
        assert built.returncode == 0, built.stderr
        requests = header_keys(server)
    shared = traces(workdir)
    assert_same_traces(shared, alone)
    # one request per PER_REQUEST samples, each sent under its first sample's key
    assert sum(requests.values()) == N_PROBLEMS * N_POOL // PER_REQUEST
    assert {key.rsplit("/", 1)[1] for key in requests} == {str(s) for s in range(0, N_POOL, PER_REQUEST)}
    # the prompt is counted once per request, split over its traces: a problem's traces add up to its requests'
    for pid in the_pool(workdir).problem_ids():
        one_prompt = alone[(pid, 0)].prompt_tokens
        shares = [shared[(pid, s)].prompt_tokens for s in range(N_POOL)]
        assert sum(shares) == one_prompt * N_POOL // PER_REQUEST
        assert all(shared[(pid, s)].completion_tokens == alone[(pid, s)].completion_tokens for s in range(N_POOL))
    summary = [line for line in built.stdout.splitlines() if line.startswith("stored ")][-1]
    assert summary.startswith(f"stored {N_PROBLEMS * N_POOL} of {N_PROBLEMS * N_POOL} requested samples")


def test_a_partly_failed_reply_loses_only_its_failed_choice_and_the_rerun_asks_for_it(
        tmp_path: Path, alone: dict[tuple[str, int], Sample]) -> None:
    # each sample key's first attempt spoils the logprobs of its reply's last choice
    with sim_server("nologprobs=1.0,max_per_sample=1", profile="local") as server:
        # the probe's replies lack logprobs too (their one choice is the last)
        workdir = make_workdir(tmp_path / "work", server.base_url,
                               **with_n(pool={"samples_per_request": PER_REQUEST,
                                              "allow_uninformative_logprobs": True}))
        first = build_here(workdir)
        assert first.returncode != 0 and "still missing" in first.stderr
        lost = {(pid, s) for pid in the_pool(workdir).problem_ids()
                for s in range(PER_REQUEST - 1, N_POOL, PER_REQUEST)}
        assert set(traces(workdir)) == {(pid, s) for pid in the_pool(workdir).problem_ids()
                                        for s in range(N_POOL)} - lost
        assert "missing logprobs" in first.stdout
        before = header_keys(server)
        second = build_here(workdir)
        assert second.returncode == 0, second.stderr
        asked = header_keys(server) - before
    assert set(asked) == {f"{pid}/{s}" for pid, s in lost}
    assert_same_traces(traces(workdir), alone)


def test_a_cut_reply_keeps_its_whole_choices_and_asks_for_the_rest_on_their_own(
        tmp_path: Path, alone: dict[tuple[str, int], Sample]) -> None:
    # each sample key's first reply is cut in half: its first choices arrive whole, the rest are asked for again
    with sim_server("truncated=1.0,max_per_sample=1", profile="local") as server:
        # keep_raw too: a trace kept from a cut reply keeps no raw response, the others their own choice's
        workdir = make_workdir(tmp_path / "work", server.base_url,
                               **with_n(pool={"samples_per_request": PER_REQUEST, "keep_raw": True}))
        built = build_here(workdir)
        assert built.returncode == 0, built.stderr
        requests = sample_requests(server)
    assert_same_traces(traces(workdir), alone)
    # the follow-up requests start past the whole choices: more keys than the groups' first samples were asked
    assert {key.rsplit("/", 1)[1] for key in requests} - {str(s) for s in range(0, N_POOL, PER_REQUEST)}
    assert all(sample.prompt_tokens > 0 for sample in traces(workdir).values())


def test_a_rerun_asks_for_the_missing_samples_with_the_right_n(tmp_path: Path) -> None:
    with sim_server(profile="local") as server:
        workdir = make_workdir(tmp_path / "work", server.base_url, **with_n(pool={"n_pool": 6,
                                                                                  "samples_per_request": 4}),
                               eval={"k": [1, 6]}, report={"k": 6})
        assert build_here(workdir).returncode == 0
        first = header_keys(server)
        assert {key.rsplit("/", 1)[1] for key in first} == {"0", "4"}  # n=4 for 0-3, n=2 for 4-5
        topped = make_workdir(tmp_path / "work", server.base_url, **with_n())  # n_pool 16: 6-15 are missing
        assert build_here(topped).returncode == 0
        added = header_keys(server) - first
    assert {key.rsplit("/", 1)[1] for key in added} == {"6", "10", "14"}  # 6-9, 10-13, 14-15


def test_an_engine_that_ignores_n_is_found_by_the_probe_and_served_one_trace_a_request(tmp_path: Path) -> None:
    with sim_server(profile="local", ignore_n=True) as server:
        workdir = make_workdir(tmp_path / "work", server.base_url, **with_n())
        built = build_here(workdir)
        assert built.returncode == 0, built.stderr
        requests = header_keys(server)
        probes = server.stats.snapshot()["by_sample"]
    assert built.stderr.count("ignores n") == 1 and "answered a request for n=2 with 1 choice" in built.stderr
    assert probes.get("probe/n") == 1
    assert sum(requests.values()) == N_PROBLEMS * N_POOL and len(stored(workdir)) == N_PROBLEMS * N_POOL


def test_a_server_that_refuses_n_is_asked_once_and_served_one_trace_a_request(tmp_path: Path) -> None:
    with sim_server(profile="local", refuse_n=True) as server:  # llama.cpp's llama-server: HTTP 500
        workdir = make_workdir(tmp_path / "work", server.base_url, **with_n())
        built = build_here(workdir)
        assert built.returncode == 0, built.stderr
        probes = server.stats.snapshot()["by_sample"]
    assert built.stderr.count("refused a request for n=2") == 1 and "Only one completion choice" in built.stderr
    assert probes.get("probe/n") == 1  # not retried
    assert sum(sample_requests(server).values()) == N_PROBLEMS * N_POOL == len(stored(workdir))


def test_a_profile_that_does_not_honour_n_sends_none(tmp_path: Path) -> None:
    with sim_server() as server:  # DeepSeek's rules: its API does not document n
        workdir = make_workdir(tmp_path / "work", server.base_url, pool={"samples_per_request": PER_REQUEST})
        built = build_here(workdir)
        assert built.returncode == 0, built.stderr
        probes = server.stats.snapshot()["by_sample"]
    assert "(profile deepseek) does not honour n: one trace per request" in built.stderr
    assert "probe/n" not in probes and sum(sample_requests(server).values()) == N_PROBLEMS * N_POOL


@pytest.mark.parametrize(("options", "said"), [
    ({}, "samples a request: 4 (pool.samples_per_request 4)"),
    ({"ignore_n": True}, "samples a request: 1 (pool.samples_per_request 4)"),
])
def test_the_probe_command_says_how_many_samples_a_request_asks(tmp_path: Path, options: dict[str, bool],
                                                                  said: str) -> None:
    with sim_server(profile="local", **options) as server:
        workdir = make_workdir(tmp_path / "work", server.base_url, **with_n())
        result = subprocess.run([sys.executable, "-m", "tracevote", "probe", "--params", "params.yaml"], cwd=workdir,
                                env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
    assert result.returncode == 0, result.stderr
    assert said in result.stdout
    assert ("it ignores n" in result.stdout) == bool(options)


def test_kill_9_with_n_loses_at_most_the_requests_in_flight(tmp_path: Path) -> None:
    with watched_server(SIM, options=ServerOptions(profile="local")) as server:
        workdir = make_workdir(tmp_path / "work", server.base_url, **with_n())
        folder = pool_folder(workdir)

        def run_until(target: int, round_number: int) -> None:
            kill_once_stored(build_command(), workdir, lambda: len(stored_in(folder)), target,
                             tmp_path / f"build-{round_number}.log")

        def requested_samples() -> Counter[str]:
            # every choice of every whole reply the server made, by its sample key
            return Counter({key: count for key, count in server.stats.snapshot()["choices"].items()
                            if not key.startswith("probe/")})

        partial = kill_at_random_moments(server, run_until, lambda: stored_in(folder), requested_samples,
                                         total=N_PROBLEMS * N_POOL,
                                         in_flight=calls_at_risk(CONCURRENCY) * PER_REQUEST, seed=5)
        final = run_build(workdir)
        assert final.returncode == 0, final.stderr
    assert partial >= 1, "no kill landed in the middle of a build; the test proved nothing"
    assert len(stored(workdir)) == N_PROBLEMS * N_POOL


def test_n_choices_from_a_server_with_a_reasoning_parser_keep_each_trace_as_a_lone_request_does(tmp_path: Path) -> None:
    """n and a reasoning parser together (vLLM serving a reasoning model with both): each choice keeps its own
    thinking beside its content, the same trace for trace as one request a trace to the same server."""
    built = {}
    with sim_server(profile="local", reasoning_parser="reasoning") as server:
        for name, overrides in (("alone", LOCAL), ("shared", with_n())):
            workdir = make_workdir(tmp_path / name, server.base_url, **overrides)
            assert build_here(workdir).returncode == 0
            built[name] = traces(workdir)
    assert_same_traces(built["shared"], built["alone"])
    assert all(sample.reasoning for sample in built["shared"].values())
    assert [s.reasoning for s in built["shared"].values()] == [s.reasoning for s in built["alone"].values()]
