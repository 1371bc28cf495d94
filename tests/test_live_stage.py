"""Stage build_online against a loopback simulated server: killed with -9 at random moments and resumed, it ends
with the traces an uninterrupted run stores and never streams a stored trace again; with streams broken at 30%, one
run stores what a fault-free run does; a stream that stays broken ends it in one line; over its spend cap it refuses
before the first request. The kill and its resume and the refusals (an exit code and one line) run the stage as a
process, as DVC does; the fetch and normalize that set a project up and the runs whose claim is what is requested,
stored, printed or scored run in the test's own process (tests/stage_here.py)."""

from __future__ import annotations

import json
import re
import shutil
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, wait_for
from tests.dvcproject import (
    copy_project,
    dvc,
    make_project,
    model_overrides,
    one_dataset,
    run,
    run_stage,
    update_params,
)
from tests.sim_servers import kill_at_random_moments, kill_once_stored, requests_by_key, watched_server
from tests.stage_here import run_stage_here
from tests.store.test_ledger_tools import tracevote
from tracevote.cli.demo import BUILTIN_PROBLEMS, deep_merge, write_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server
from tracevote.store.live import LiveLedger, LiveTrace

pytestmark = pytest.mark.slow

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=150, critique_noise=0.3)
CONCURRENCY = 3
WARMUP, BUDGET = 4, 10


def project(root: Path, base_url: str, *, pool: dict[str, Any] | None = None, **live: Any) -> Path:
    """A folder with params.yaml (the fixture's, one local dataset `toy` of the 12 demo problems, an endpoint at
    `base_url`, one live method, `pool` keys changed) and the dataset normalized."""
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), deep_merge(one_dataset("toy", BUILTIN_PROBLEMS), {
        **model_overrides(backend="openai", base_url=base_url, name="tracevote-sim", needs_key=False, extra_body={}),
        "decoding": {"max_tokens": 600}, "confidence": {"group_size": 16}, **({"pool": pool} if pool else {}),
        "online": {"warmup": WARMUP, "live": {"datasets": ["toy"], "methods": ["low"], "budget": BUDGET,
                                              "concurrency": CONCURRENCY, "max_cost_usd": 5.0, **live}}}))
    root.mkdir(parents=True)
    write_params(root / "params.yaml", params)
    run_stage_here(root, "fetch.py", "--dataset", "toy", "--out", "data/raw/toy.jsonl")
    run_stage_here(root, "normalize.py", "--dataset", "toy", "--raw", "data/raw/toy.jsonl", "--out", "data/toy.jsonl")
    return root


COMMAND = [sys.executable, str(REPO_ROOT / "stages" / "build_online.py"), "--dataset", "toy", "--problems",
           "data/toy.jsonl", "--online", "online/toy", "--manifest", "online/toy.json"]


def stored(root: Path) -> set[str]:
    """"<problem>/<trace>" of every stored trace: the sample key its request carried."""
    keys = set()
    for meta in (root / "online" / "toy").glob("*/live.json"):
        ledger = LiveLedger(meta.parent)
        for log in (meta.parent / "calls").glob("*.tvf"):
            keys |= {f"{log.stem}/{key}" for key in ledger.stored_keys(log.stem)}
    return keys


def traces(root: Path) -> dict[str, tuple]:
    """Every stored trace as kept (its tokens, how it ended, its threshold), by sample key."""
    kept = {}
    for meta in sorted((root / "online" / "toy").glob("*/live.json")):
        ledger = LiveLedger(meta.parent)
        for problem_id in ledger.item_ids():
            for index, trace in ledger.traces(problem_id).items():
                kept[f"{problem_id}/{index}"] = (trace.sample.tokens, trace.stop_reason, trace.threshold)
    return kept


def test_killed_at_random_moments_it_resumes_to_what_an_uninterrupted_run_stores(
        tmp_path: Path, fault_free_run: Path) -> None:
    expected = traces(fault_free_run)  # the uninterrupted run's
    whole = (fault_free_run.parent / RUN_STDOUT).read_text()
    stopped = sum(reason == "confidence" for _, reason, _ in expected.values())
    assert f"stored {len(expected)} of {len(expected)} traces started" in whole
    assert f"{stopped} confidence" in whole and "counted by the client: the server sent no usage" in whole
    assert len(expected) == 12 * BUDGET
    assert any(reason == "confidence" for _, reason, _ in expected.values()), "no trace stopped early"
    with watched_server(SIM) as slow:
        root = project(tmp_path / "killed", slow.base_url)

        def run_until(target: int, round_number: int) -> None:
            kill_once_stored(COMMAND, root, lambda: len(stored(root)), target, tmp_path / f"run-{round_number}.log")

        partial = kill_at_random_moments(slow, run_until, lambda: stored(root), lambda: probe_free(slow),
                                         total=len(expected), in_flight=CONCURRENCY, seed=11)
        before, requests_before = stored(root), probe_free(slow)
        run_stage(root, "build_online.py", *COMMAND[2:])
        assert not set(probe_free(slow) - requests_before) & before, "a stored trace was streamed again"
    assert partial >= 1, "no kill landed in the middle of a run; the test proved nothing"
    assert traces(root) == expected


@pytest.fixture(scope="module")
def fault_free_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose run against a server without faults ended: read it, or copy it (moved_to) to change it.
    Beside it, RUN_STDOUT: what the run printed; SERVER_STATS: the server's own account of the run (/_stats) once
    every stream's handler ended."""
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = project(tmp_path_factory.mktemp("fault-free") / "project", base_url)
        done = run_stage_here(root, "build_online.py", *COMMAND[2:])
        (root.parent / RUN_STDOUT).write_text(done.stdout)
        n_traces = len(stored_traces(root))
        wait_for(lambda: sum(server_stats(base_url)["streams"].values()) == n_traces,
                 "every stream's handler to end")  # a handler counts its tokens after writing them
        (root.parent / SERVER_STATS).write_text(json.dumps(server_stats(base_url)))
    return root


RUN_STDOUT, SERVER_STATS = "build_online.stdout", "server_stats.json"


@pytest.fixture(scope="module")
def fault_free(fault_free_run: Path) -> dict[str, LiveTrace]:
    """The traces a run against a server without faults stores, by sample key."""
    return stored_traces(fault_free_run)


def moved_to(run: Path, destination: Path, base_url: str, **pool: Any) -> Path:
    """A copy of the project `run` whose endpoint is the server at `base_url` (and `pool` keys changed): the next
    run's requests are all that server's."""
    root = copy_project(run, destination)
    update_params(root, {"endpoints": {"deepseek": {"base_url": base_url}}, **({"pool": pool} if pool else {})})
    return root


def as_kept(found: dict[str, LiveTrace]) -> dict[str, tuple]:
    """What a run decided for each trace: its kept tokens and text (hence its answer), how and where it stopped."""
    return {key: (t.sample.tokens, t.sample.text, t.stop_reason, t.threshold) for key, t in found.items()}


SCORE = ["score_online.py", "--dataset", "toy", "--problems", "data/toy.jsonl", "--manifest", "online/toy.json",
         "--scores", "data/scores", "--aggregate", "data/aggregate", "--metrics", "metrics/online_live/toy",
         "--headline", "metrics/headline/online_live/toy", "--plots", "plots/online_live/toy"]


# each way a stream breaks after its first tokens (sim.faults): cut inside an HTTP chunk, no last chunk, half an
# event, no finish chunk, only -9999 sentinel logprobs, in one run (each kind at 6%, 30% of attempts in all); a
# stall past the read timeout (pool.request_timeout_s 2) in a run of its own, since a loaded machine may add a
# timeout of its own there
BROKEN_EACH_WAY = ("cut", "drop", "malformed", "truncated", "sentinel")


def test_streams_broken_five_ways_in_30_percent_of_attempts_are_asked_again_and_stored_as_a_fault_free_run_does(
        tmp_path: Path, fault_free: dict[str, LiveTrace]) -> None:
    spec = ",".join(f"{kind}=0.06" for kind in BROKEN_EACH_WAY) + ",seed=4,stream_after=6"
    with running_server(SimModel(SIM), parse_faults(spec)) as base_url:
        root = project(tmp_path / "broken", base_url)
        done = run_stage_here(root, "build_online.py", *COMMAND[2:])
        requests, struck = probe_free(base_url), server_stats(base_url)["outcomes"]
    found = stored_traces(root)
    assert as_kept(found) == as_kept(fault_free)
    assert all(struck.get(kind, 0) >= 3 for kind in BROKEN_EACH_WAY), struck  # each way, several times
    failed = sum(t.failed_attempts for t in found.values())
    assert 0 < failed == requests.total() - len(found)  # each broken attempt counted once, on its trace
    assert any(t.failed_attempts for key, t in found.items() if int(key.rsplit("/", 1)[1]) < WARMUP)
    assert f"{failed} stream attempts broke after tokens arrived" in done.stdout
    run_stage_here(root, *SCORE)  # the results bill the broken attempts' tokens
    live = json.loads((root / "metrics" / "online_live" / "toy" / "summary.json").read_text())["live"]["low"]
    billed = sum(t.completion_tokens + t.failed_tokens for t in found.values())
    assert live["failed_attempts"] == failed and live["completion_tokens"] * 12 == pytest.approx(billed)
    assert f"live low: {failed} stream attempts broke" in (
        root / "metrics" / "online_live" / "toy" / "live.md").read_text()


def test_streams_stalled_past_the_read_timeout_are_asked_again_and_one_run_stores_what_a_fault_free_run_does(
        tmp_path: Path, fault_free: dict[str, LiveTrace]) -> None:
    """At 10% of attempts (30% would be three times the stalls, each waiting out the 2 s read timeout)."""
    with running_server(SimModel(SIM), parse_faults("slow=0.1,seed=4,stream_after=6,slow_s=30")) as base_url:
        root = project(tmp_path / "slow", base_url, pool={"request_timeout_s": 2})
        done = run_stage_here(root, "build_online.py", *COMMAND[2:])
        requests = probe_free(base_url)
    found = stored_traces(root)
    assert as_kept(found) == as_kept(fault_free)
    failed = sum(t.failed_attempts for t in found.values())
    # each stall counted once, on its trace (a loaded machine may add a timeout before any token arrived, retried as
    # any failed request, where the read timeout is short)
    assert 0 < failed <= requests.total()
    assert any(t.failed_attempts for key, t in found.items() if int(key.rsplit("/", 1)[1]) < WARMUP)
    assert f"{failed} stream attempts broke after tokens arrived" in done.stdout


def test_a_stream_that_stays_broken_ends_the_run_after_max_retries_in_one_line_naming_it(
        tmp_path: Path, fault_free_run: Path) -> None:
    """The warmup is stored by a sound server first (the fault-free run: so no probe asks the broken one); two
    traces more per problem then meet a server whose every stream breaks."""
    with running_server(SimModel(SIM), parse_faults("truncated=1,max_per_sample=1000")) as base_url:
        root = moved_to(fault_free_run, tmp_path / "broken", base_url, max_retries=2)
        update_params(root, {"online": {"live": {"budget": BUDGET + 2}}})
        failed = run_stage(root, "build_online.py", *COMMAND[2:], check=False)
        requests = probe_free(base_url)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    [line] = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    named = re.match(r"error: trace (\S+) \(low\) still failed after pool\.max_retries \(2\) retries: stream cut", line)
    assert named, line
    assert requests[named.group(1)] == 3 and "its stream broke 3 times (stream cut x3), and the" in line
    assert requests.total() <= 3 * CONCURRENCY  # no stream started after the first trace gave up


def probe_free(server: Any) -> Counter[str]:
    """The server's requests by sample key, but the probe's."""
    return Counter({key: n for key, n in requests_by_key(server).items() if not key.startswith("probe/")})


def stored_traces(root: Path) -> dict[str, LiveTrace]:
    """Every stored trace, by sample key."""
    found = {}
    for meta in (root / "online" / "toy").glob("*/live.json"):
        ledger = LiveLedger(meta.parent)
        for problem_id in ledger.item_ids():
            found |= {f"{problem_id}/{index}": trace for index, trace in ledger.traces(problem_id).items()}
    return found


def server_stats(base_url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base_url}/_stats", timeout=60) as response:
        return json.loads(response.read())


def test_a_stop_after_the_server_finished_the_trace_is_recorded_as_the_server_saw_it_and_counted_in_live_md(
        tmp_path: Path, fault_free_run: Path) -> None:
    """The unpaced simulator runs far ahead of the client, so many a stop comes after the server finished: the
    server's own count (/_stats) says which could have, and live.md counts those the client saw finished."""
    root = copy_project(fault_free_run, tmp_path / "finished")  # score_online writes into it
    traces = stored_traces(root)
    stats = json.loads((fault_free_run.parent / SERVER_STATS).read_text())
    generated = stats["generated_tokens"]
    assert all(isinstance(trace.server_finished, bool) for trace in traces.values())
    closed = [trace for trace in traces.values() if trace.stop_reason in ("confidence", "consensus-cancelled")]
    assert closed, "no trace stopped early; the test proved nothing"
    for key, trace in traces.items():
        if trace.stop_reason == "finished":  # every token the server made arrived
            assert (trace.server_finished, generated[key]) == (True, trace.received), key
        else:  # the server may have made more than the client received before it saw the close
            assert generated[key] >= trace.received, key
    # each stop the client saw come after the finish was a stream the server finished
    assert stats["streams"]["finished"] >= len(traces) - len(closed) + sum(bool(t.server_finished) for t in closed)
    scored = run_stage_here(root, "score_online.py", "--dataset", "toy", "--problems", "data/toy.jsonl", "--manifest",
                       "online/toy.json", "--scores", "data/scores", "--aggregate", "data/aggregate", "--metrics",
                       "metrics/online_live/toy", "--headline", "metrics/headline/online_live/toy", "--plots",
                       "plots/online_live/toy")
    after_finish = sum(bool(trace.server_finished) for trace in closed)
    live = (root / "metrics" / "online_live" / "toy" / "live.md").read_text()
    assert live.strip() in scored.stdout  # it prints what it found, as every other scoring stage does
    assert (f"live low: {after_finish} of {len(closed)} stops came after the server had finished the trace (its "
            "finish_reason arrived before the client closed the stream), saving it nothing.") in live.splitlines()
    summary = json.loads((root / "metrics" / "online_live" / "toy" / "summary.json").read_text())
    assert summary["live"]["low"]["closed_after_finish"] == after_finish


def test_over_its_spend_cap_it_refuses_before_any_request(tmp_path: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = project(tmp_path / "capped", base_url, max_cost_usd=0.0001)
        refused = run_stage(root, "build_online.py", *COMMAND[2:], check=False)
        assert requests_by_key(base_url) == Counter()
    assert refused.returncode != 0
    assert "online.live.max_cost_usd" in refused.stderr and "every one to decoding.max_tokens" in refused.stdout
    assert not (root / "online").exists()  # no empty ledger left behind


def test_its_opening_estimate_against_the_simulator_says_simulated(tmp_path: Path) -> None:
    """As every other paid stage's does (issue 43): the simulator behind `backend: openai` is asked for its model
    list before the estimate is printed, which then reads as hypothetical, not as a bill."""
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = project(tmp_path / "capped", base_url, max_cost_usd=0.0001)
        refused = run_stage_here(root, "build_online.py", *COMMAND[2:], check=False)
    [opening] = [line for line in refused.stdout.splitlines() if "worst case" in line]
    assert ("cost if this were tracevote-sim at list prices" in opening
            and opening.endswith("(SIMULATED: nothing will be spent)")), opening


def test_a_changed_budget_starts_a_new_method_ledger_and_reuses_the_warmup(
        tmp_path: Path, fault_free_run: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = moved_to(fault_free_run, tmp_path / "budgets", base_url)
        first = traces(root)
        before = probe_free(base_url)
        update_params(root, {"online": {"live": {"budget": BUDGET + 2}}})
        run_stage_here(root, "build_online.py", *COMMAND[2:])
        new_requests = probe_free(base_url) - before
    folders = sorted(path.name.split("-")[0] for path in (root / "online" / "toy").iterdir())
    assert folders == ["low", "low", "warmup"]
    assert not any(int(key.rsplit("/", 1)[1]) < WARMUP for key in new_requests), "the warmup was streamed again"
    assert sum(new_requests.values()) == 12 * (BUDGET + 2 - WARMUP)
    again = traces(root)
    assert {key: value for key, value in first.items() if int(key.rsplit("/", 1)[1]) < WARMUP} == \
        {key: value for key, value in again.items() if int(key.rsplit("/", 1)[1]) < WARMUP}


def test_in_a_fresh_clone_it_refuses_to_pay_for_what_dvc_lock_records(tmp_path: Path) -> None:
    problems = tmp_path / "toy.jsonl"  # 4 problems keep it short
    problems.write_text("".join(BUILTIN_PROBLEMS.read_text().splitlines(keepends=True)[:4]))
    params = deep_merge(one_dataset("toy", problems), {
        **model_overrides(backend="sim", name="tracevote-sim", needs_key=False, extra_body={}, sim={"mean_tokens": 80}),
        "decoding": {"max_tokens": 300}, "confidence": {"group_size": 16},
        "online": {"warmup": 2, "live": {"datasets": ["toy"], "methods": ["low"], "budget": 4}}})
    root = make_project(tmp_path / "clone", params)
    dvc(root, "repro", "build_online@toy")
    shutil.rmtree(root / "online" / "toy")  # what a fresh clone lacks until `dvc pull`
    refused = dvc(root, "repro", "build_online@toy", check=False)
    assert refused.returncode != 0 and "dvc pull" in refused.stdout + refused.stderr
    assert not (root / "online" / "toy").exists()


def test_ledger_verify_checks_the_live_ledgers_and_repair_lets_the_next_run_stream_only_what_it_dropped(
        tmp_path: Path, fault_free_run: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = moved_to(fault_free_run, tmp_path / "verified", base_url)
        verified = tracevote(root, "ledger", "verify")
        assert verified.returncode == 0, verified.stdout
        assert verified.stdout.count(": 12 logs, ") == 2 and "PROBLEMS" not in verified.stdout
        expected = traces(root)
        [warmup] = (root / "online" / "toy").glob("warmup-*")
        log = next((warmup / "calls").glob("*.tvf"))
        data = bytearray(log.read_bytes())
        data[len(data) // 2] ^= 0xFF  # one flipped byte in the middle of a frame
        log.write_bytes(bytes(data))
        damaged = tracevote(root, "ledger", "verify")
        assert damaged.returncode == 1 and f"{log.name}: DAMAGED at byte" in damaged.stdout
        assert tracevote(root, "ledger", "repair", str(log)).returncode == 0
        dropped = expected.keys() - traces(root).keys()
        assert dropped and all(key.startswith(log.stem + "/") for key in dropped)
        before = probe_free(base_url)
        run_stage_here(root, "build_online.py", *COMMAND[2:])
        assert set(probe_free(base_url) - before) == dropped
    assert traces(root) == expected


def test_the_results_match_the_replay_on_the_same_traces_and_a_changed_budget_shows_in_metrics_diff(
        tmp_path: Path) -> None:
    problems = tmp_path / "toy.jsonl"  # 4 problems keep it short
    problems.write_text("".join(BUILTIN_PROBLEMS.read_text().splitlines(keepends=True)[:4]))
    params = deep_merge(one_dataset("toy", problems), {
        **model_overrides(backend="sim", name="tracevote-sim", needs_key=False, extra_body={}, sim={"mean_tokens": 80}),
        "decoding": {"max_tokens": 300}, "pool": {"n_pool": 8}, "confidence": {"group_size": 16, "tail_tokens": 16},
        "eval": {"k": [1, 4, 8], "repeat": 4, "bootstrap": 100}, "report": {"k": 8},
        "online": {"warmup": 4, "live": {"datasets": ["toy"], "methods": ["low"], "budget": 8}}})
    root = make_project(tmp_path / "results", params)
    dvc(root, "repro", "score_online@toy")
    summary = json.loads((root / "metrics" / "online_live" / "toy" / "summary.json").read_text())
    live, same = summary["live"]["low"], summary["same_traces"]
    assert summary["simulated"] and summary["same_traces_absent"] is None
    assert live["kept_tokens"] == pytest.approx(same["replay_tokens"]["low"])  # stopped where the replay stops
    assert live["accuracy_pct"] == pytest.approx(same["replay_accuracy_pct"]["low"])
    assert live["traces_stopped"] > 0 and same["saving_vs_cons_pct"]["low"] > 0
    assert "SIMULATED" in (root / "metrics" / "online_live" / "toy" / "live.md").read_text()
    # K = budget = the whole pool: the aggregate's working sets are the live run's traces
    assert summary["replay_working_sets"]["tokens"]["low"] == pytest.approx(same["replay_tokens"]["low"])
    headline = json.loads((root / "metrics" / "headline" / "online_live" / "toy" / "online_low.json").read_text())
    assert headline["replay_mean_accuracy_pct"] == pytest.approx(live["accuracy_pct"], abs=0.01)
    run(root, "git", "add", "-A")
    run(root, "git", "commit", "-qm", "built")
    dvc(root, "exp", "run", "-S", "online.live.budget=6", "score_online@toy")
    diff = dvc(root, "metrics", "diff", "--json").stdout
    changed = json.loads(diff)["metrics/headline/online_live/toy/online_low.json"]
    assert changed["k"] == {"old": 8, "new": 6, "diff": -2}
    assert "tokens_per_problem" in changed
    summary = json.loads((root / "metrics" / "online_live" / "toy" / "summary.json").read_text())
    assert summary["replay_working_sets"] is None and "not one of eval.k" in summary["replay_working_sets_absent"]
    # a file where an output folder goes: one line naming it, and nothing written
    plots = root / "plots" / "online_live" / "toy"
    shutil.rmtree(plots)
    plots.write_text("a file where the stage's folder goes\n")
    before = (root / "metrics" / "online_live" / "toy" / "summary.json").read_bytes()
    failed = run_stage(root, "score_online.py", "--dataset", "toy", "--problems", "data/toy.jsonl", "--manifest",
                       "online/toy.json", "--scores", "data/scores", "--aggregate", "data/aggregate", "--metrics",
                       "metrics/online_live/toy", "--headline", "metrics/headline/online_live/toy", "--plots",
                       "plots/online_live/toy", check=False)
    assert failed.returncode == 2 and "Traceback" not in failed.stdout + failed.stderr
    assert failed.stderr.splitlines() == ["error: plots/online_live/toy: a file sits where an output folder goes; "
                                          "move or delete it and run the stage again (nothing was written)"]
    assert (root / "metrics" / "online_live" / "toy" / "summary.json").read_bytes() == before
