"""Simulated and real replies never share a ledger: a ledger begun on one kind refuses a reply of the other.

The "real" server here is a loopback proxy in front of the simulator that removes everything by which the
simulator names itself (its response header and its system_fingerprint), as a real model's server would
answer: the client then has no way to tell, and the ledger must treat its replies as real.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests

from tests.conftest import FIXTURE_PARAMS
from tests.rows_server import serving
from tests.sampling.test_build import make_workdir, run_build, the_pool
from tests.sampling.test_client import make_client
from tests.sim_servers import watched_server
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.errors import DataError
from tracevote.core.simulated import FINGERPRINT_PREFIX, SIMULATED_HEADER
from tracevote.sampling.client import ChatClient
from tracevote.sampling.prompts import SOLVE
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import OneCall, run_calls
from tracevote.store.calls import Call, CallLedger
from tracevote.store.ledger import Ledger

SIM = SimConfig(seed=3, signal=1.0, accuracy=0.5, mean_tokens=60)
REAL_FINGERPRINT = b"fp_0123456789"  # as long as the simulator's prefix, so nothing else in the body moves
assert len(REAL_FINGERPRINT) == len(FINGERPRINT_PREFIX)


class _Unmarking(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: str

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        forwarded = {name: value for name, value in self.headers.items()
                     if name.lower().startswith(("x-", "content-type"))}
        answer = requests.post(self.upstream + self.path, data=body, headers=forwarded, timeout=60)
        data = answer.content.replace(FINGERPRINT_PREFIX.encode(), REAL_FINGERPRINT)
        self.send_response(answer.status_code)
        for name, value in answer.headers.items():
            if name.lower() not in (SIMULATED_HEADER.lower(), "content-length", "connection", "keep-alive"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def real_looking(upstream: str) -> Iterator[str]:
    """A loopback URL that answers as `upstream` (a simulator's base URL) does, unmarked."""
    handler = type("Handler", (_Unmarking,), {"upstream": upstream.rstrip("/").removesuffix("/v1")})
    with serving(handler) as url:
        yield f"{url}/v1"


def questions(keys: range) -> list[OneCall]:
    return [OneCall(Call("item", str(key), SOLVE, [{"role": "user", "content": f"What is {key} + 1?"}]))
            for key in keys]


def run_on(base_url: str, ledger: CallLedger, keys: range) -> None:
    pricing = load_params(FIXTURE_PARAMS).deepconf_model.priced()
    client: ChatClient = make_client(base_url)
    with client:
        run_calls(ledger, questions(keys), lambda call: paid_reply(client, call, pricing), concurrency=2)


def stored_count(ledger: Ledger) -> int:
    return len(ledger.stored_keys("item"))


@pytest.mark.parametrize("first_real", [True, False], ids=["real-then-simulated", "simulated-then-real"])
def test_a_ledger_refuses_replies_of_the_other_kind(tmp_path: Path, first_real: bool) -> None:
    with watched_server(SIM) as server, real_looking(server.base_url) as real_url:
        first, second = (real_url, server.base_url) if first_real else (server.base_url, real_url)
        ledger = CallLedger.open_at(tmp_path / "ledger", {"model": "m"}, simulated=False)
        run_on(first, ledger, range(3))
        assert stored_count(ledger) == 3 and ledger.simulated is not first_real
        with pytest.raises(DataError, match=r"holds (real|simulated) replies") as refused:
            run_on(second, ledger, range(3, 6))
    held = "real" if first_real else "simulated"
    assert f"holds {held} replies" in str(refused.value) and "nothing of this reply was stored" in str(refused.value)
    reread = CallLedger(tmp_path / "ledger")
    assert stored_count(reread) == 3 and reread.simulated is not first_real
    assert {record.simulated for record in reread.records("item").values()} == {not first_real}


def test_an_empty_ledger_takes_the_kind_of_its_first_reply(tmp_path: Path) -> None:
    ledger = CallLedger.open_at(tmp_path / "ledger", {"model": "m"}, simulated=False)
    ledger.check_kind(simulated=True)  # nothing stored yet: the ledger was only named for a guess
    assert CallLedger(tmp_path / "ledger").simulated
    ledger.check_kind(simulated=False)
    assert not CallLedger(tmp_path / "ledger").simulated


def test_a_pool_begun_on_a_real_server_is_not_finished_on_the_simulator(tmp_path: Path) -> None:
    with watched_server(SIM) as server, real_looking(server.base_url) as real_url:
        workdir = make_workdir(tmp_path / "w", real_url, pool={"n_pool": 2}, eval={"k": [1, 2]}, report={"k": 2})
        built = run_build(workdir)
        assert built.returncode == 0, built.stderr
        real_samples = {pid: the_pool(workdir).stored_ids(pid) for pid in the_pool(workdir).problem_ids()}
        assert not the_pool(workdir).simulated and sum(map(len, real_samples.values())) == 2 * 4

        make_workdir(workdir, server.base_url, pool={"n_pool": 4}, eval={"k": [1, 4]}, report={"k": 4})
        asked_before = server.stats.snapshot()["requests"]
        topped_up = run_build(workdir)
        solve_requests = server.stats.snapshot()["requests"] - asked_before
    assert topped_up.returncode != 0
    assert "holds real replies" in topped_up.stderr and "Traceback" not in topped_up.stderr
    pool = the_pool(workdir)
    assert not pool.simulated
    assert {pid: pool.stored_ids(pid) for pid in pool.problem_ids()} == real_samples
    assert solve_requests <= 3  # the probe's requests only: no sample was paid for and then dropped
