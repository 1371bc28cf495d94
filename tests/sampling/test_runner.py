"""The ledger's runner on a toy two-step call chain: replay, resume mid-conversation, kill -9 at random moments."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, hang_guard_s, wait_for
from tests.dvcproject import project_env
from tests.sampling import toy_chain
from tests.sim_servers import (
    final_state,
    kill_at_random_moments,
    kill_once_stored,
    requests_by_key,
    stored_keys,
    watched_server,
)
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.errors import DataError, FatalAPIError
from tracevote.core.retry import TransientError
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import RunSummary, calls_at_risk, run_calls
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server
from tracevote.store.calls import Call, CallLedger

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=80)
CHAINS = 2
CALLS = 2 * CHAINS * toy_chain.N_PROBLEMS


@pytest.fixture
def server() -> Iterator[str]:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        yield base_url


def test_a_rerun_replays_everything_and_sends_nothing(tmp_path: Path, server: str) -> None:
    first = toy_chain.run(tmp_path / "ledger", server, CHAINS)
    assert (first.requested, first.stored, first.replayed, dict(first.failures)) == (CALLS, CALLS, 0, {})
    assert set(requests_by_key(server).values()) == {1}, "a call was requested twice"
    again = toy_chain.run(tmp_path / "ledger", server, CHAINS)
    assert (again.requested, again.stored, again.replayed) == (0, 0, CALLS)
    assert sum(requests_by_key(server).values()) == CALLS


def test_a_conversation_resumes_from_its_first_missing_call(tmp_path: Path, server: str) -> None:
    ledger = CallLedger.open_at(tmp_path / "ledger", toy_chain.SETTING, simulated=True)
    with toy_chain.client_for(server) as client:
        def solves_only(call: Call):  # the second step's server is down
            if str(call.key).endswith("/check"):
                raise TransientError("HTTP 503", "down for the test")
            return paid_reply(client, call, toy_chain.PRICING)

        partial = run_calls(ledger, toy_chain.chains(CHAINS), solves_only, concurrency=3)
    assert (partial.stored, dict(partial.failures)) == (CALLS // 2, {"HTTP 503": CALLS // 2})
    before = requests_by_key(server)
    resumed = toy_chain.run(tmp_path / "ledger", server, CHAINS)
    new = requests_by_key(server) - before
    assert (resumed.requested, resumed.replayed) == (CALLS // 2, CALLS // 2)
    assert all(key.endswith("/check") for key in new) and set(new.values()) == {1}
    toy_chain.run(tmp_path / "uninterrupted", server, CHAINS)
    assert final_state(tmp_path / "ledger") == final_state(tmp_path / "uninterrupted")


def test_a_replay_that_would_build_another_request_stops_before_sending(tmp_path: Path, server: str) -> None:
    toy_chain.run(tmp_path / "ledger", server, CHAINS)
    ledger = CallLedger(tmp_path / "ledger")
    changed = [dataclasses.replace(chain, problem=chain.problem + " (reworded)") for chain in toy_chain.chains(1)]
    before = requests_by_key(server)
    with pytest.raises(DataError, match="answered another request"):
        run_calls(ledger, changed, lambda call: pytest.fail(f"{call.key} was sent"), concurrency=2)
    assert requests_by_key(server) == before


def test_two_conversations_asking_for_one_call_is_an_error(tmp_path: Path, server: str) -> None:
    ledger = CallLedger.open_at(tmp_path / "ledger", toy_chain.SETTING, simulated=True)
    twice = toy_chain.chains(1)[:1] * 2
    with toy_chain.client_for(server) as client, pytest.raises(DataError, match="asked for by two conversations"):
        run_calls(ledger, twice, lambda call: paid_reply(client, call, toy_chain.PRICING), concurrency=2)


@dataclasses.dataclass(frozen=True)
class RefusedSolve:
    """A conversation whose one call the server refuses (a kind the simulator has no responder for: HTTP 400, as a
    provider refuses one prompt it will not answer)."""

    item_id: str

    def next_call(self, replies: list) -> Call | None:
        return None if replies else Call(self.item_id, "refused/solve", "no-such-kind", [{"role": "user",
                                                                                         "content": "refuse me"}])


def test_a_refused_request_stops_the_run_and_the_calls_in_flight_are_stored(tmp_path: Path, server: str) -> None:
    """A FatalAPIError from one call sends nothing more, and the replies in flight, paid for, are stored before
    the error is raised: a rerun requests none of them again."""
    ledger = CallLedger.open_at(tmp_path / "ledger", toy_chain.SETTING, simulated=True)
    refused, *others = [RefusedSolve("toy-00"), *toy_chain.chains(CHAINS)]
    summary = RunSummary()
    with toy_chain.client_for(server) as client:
        def call_fn(call: Call):
            if call.item_id != refused.item_id:  # the others answer once the refusal has been taken in
                wait_for(lambda: summary.requested >= 1, "the refused call to be taken in")
            return paid_reply(client, call, toy_chain.PRICING)

        with pytest.raises(FatalAPIError, match="HTTP 400"):
            run_calls(ledger, [refused, *others], call_fn, concurrency=3, summary=summary)
    # every call sent beside the refused one landed and was stored: the two in flight, and any a freed worker took
    # up before the refusal was taken in (at most what the run had submitted); no conversation went on
    sent = requests_by_key(server)
    stored = stored_keys(tmp_path / "ledger")
    assert sent["toy-00/refused/solve"] == 1 and 2 <= len(stored) <= calls_at_risk(3) - 1, sent
    assert stored == {key for key in sent if key != "toy-00/refused/solve"}
    assert all(key.endswith("/solve") for key in sent)
    resumed = toy_chain.run(tmp_path / "ledger", server, CHAINS)
    assert (resumed.replayed, resumed.requested) == (len(stored), CALLS - len(stored))
    assert set(requests_by_key(server).values()) == {1}, "a stored call was requested again"


# --- kill -9 ------------------------------------------------------------------------------------------


def chain_command(ledger: Path, base_url: str, chains: int) -> list[str]:
    return [sys.executable, "-m", "tests.sampling.toy_chain", "--ledger", str(ledger), "--base-url", base_url,
            "--chains", str(chains)]


@pytest.mark.slow
def test_kill_9_at_random_moments_mid_conversation_then_resume(tmp_path: Path) -> None:
    chains, concurrency = 6, 4  # toy_chain.run's concurrency
    total = 2 * chains * toy_chain.N_PROBLEMS
    ledger = tmp_path / "ledger"
    with watched_server(SIM) as slow:
        def run_until(target: int, round_number: int) -> None:
            kill_once_stored(chain_command(ledger, slow.base_url, chains), REPO_ROOT,
                             lambda: len(stored_keys(ledger)), target, tmp_path / f"chain-{round_number}.log")

        partial_rounds = kill_at_random_moments(slow, run_until, lambda: stored_keys(ledger),
                                                lambda: requests_by_key(slow), total=total,
                                                in_flight=calls_at_risk(concurrency), seed=5)
        before, requests_before = stored_keys(ledger), requests_by_key(slow)
        final = subprocess.run(chain_command(ledger, slow.base_url, chains), cwd=REPO_ROOT, env=project_env(),
                               capture_output=True, text=True, timeout=hang_guard_s())
        assert final.returncode == 0, final.stderr
        assert not set(requests_by_key(slow) - requests_before) & before
    assert partial_rounds >= 1, "no kill landed in the middle of a run; the test proved nothing"
    assert any(key.endswith("/check") for key in before) and len(stored_keys(ledger)) == total
    with running_server(SimModel(SIM), parse_faults("")) as fresh:
        toy_chain.run(tmp_path / "uninterrupted", fresh, chains)
    assert final_state(ledger) == final_state(tmp_path / "uninterrupted")
