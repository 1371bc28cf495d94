"""kill -9 tests against a sim server that counts the connections it holds: after a kill, wait until every
request the killed process sent has been counted, then check what was stored against what was requested.
The server can also hold every request after the first few until the test lets them go, so a kill lands
mid-build however slow the machine is."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import random
import signal
import socket
import subprocess
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EVENT_TIMEOUT_S, wait_for
from tests.dvcproject import project_env
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.simulated import SAMPLE_HEADER
from tracevote.sampling.runner import calls_at_risk
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer, _Handler, running_server, stop_server
from tracevote.store.calls import CallLedger


class Gate:
    """Lets the first `admit` requests through (all when None) and holds the rest until `release()`."""

    def __init__(self, admit: int | None) -> None:
        self.admit = admit
        self.released = threading.Event()
        self._lock = threading.Lock()
        self.passed = 0

    def pass_through(self) -> None:
        with self._lock:
            self.passed += 1
            held = self.admit is not None and self.passed > self.admit
        if held:
            self.released.wait(EVENT_TIMEOUT_S)

    def release(self) -> None:
        self.released.set()


class _GatedHandler(_Handler):
    server: WatchedServer

    def do_POST(self) -> None:
        self.server.gate.pass_through()
        super().do_POST()


class WatchedServer(SimServer):
    """The sim server, also counting the connections it holds: accepted and not yet shut down; its requests
    pass through `gate`."""

    def __init__(self, *args: Any, admit: int | None = None) -> None:
        super().__init__(*args)
        self.RequestHandlerClass = _GatedHandler
        self.gate = Gate(admit)
        self.open_connections = 0
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self.open_connections += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:
        super().shutdown_request(request)
        with self._open_lock:
            self.open_connections -= 1


def module_server(sim: SimConfig) -> Any:
    """A module-scoped fixture, named as it is assigned: the simulated model `sim` behind a fault-free loopback
    server; it yields the server's base URL."""

    @pytest.fixture(scope="module")
    def server() -> Iterator[str]:
        with running_server(SimModel(sim), parse_faults("")) as base_url:
            yield base_url

    return server


@contextlib.contextmanager
def watched_server(sim: SimConfig, answers: dict[str, int] | None = None,
                   first_errors: dict[str, int] | None = None, admit: int | None = None,
                   options: ServerOptions | None = None) -> Iterator[WatchedServer]:
    """Every response takes 0.1 s, so a run lasts long enough for kills to land in its middle; with `admit`,
    the requests after the first `admit` wait until `server.gate.release()` (or the block ends), so a build
    cannot finish before the test kills it. `answers` are the known problems' gold answers (problem text ->
    answer) and `first_errors` the known solutions' labels, as a build's own simulator knows them."""
    server = WatchedServer(("127.0.0.1", 0), SimModel(sim, answers, first_errors),
                           parse_faults("slow=1.0,slow_s=0.1,max_per_sample=1000000"), options or ServerOptions(),
                           admit=admit)
    threading.Thread(target=server.serve_forever, args=(0.05,), name="watched-sim-server", daemon=True).start()
    try:
        yield server
    finally:
        server.gate.release()
        stop_server(server)


class _HoldingHandler(_Handler):
    server: HoldingServer

    def do_POST(self) -> None:
        self.server.admit(self.headers.get(SAMPLE_HEADER))
        super().do_POST()


class HoldingServer(SimServer):
    """The sim server, holding each request whose sample key `held` picks until `release()`: a test decides which
    traces cannot arrive before an event it waits for, whatever the machine's speed. `held_keys` lists those held."""

    def __init__(self, *args: Any, held: Callable[[str], bool]) -> None:
        super().__init__(*args)
        self.RequestHandlerClass = _HoldingHandler
        self.held = held
        self.held_keys: list[str] = []
        self.released = threading.Event()
        self._held_lock = threading.Lock()

    def admit(self, sample_key: str | None) -> None:
        if sample_key is None or not self.held(sample_key):
            return
        with self._held_lock:
            self.held_keys.append(sample_key)
        self.released.wait(EVENT_TIMEOUT_S)

    def release(self) -> None:
        self.released.set()


@contextlib.contextmanager
def holding_server(model: SimModel, held: Callable[[str], bool]) -> Iterator[HoldingServer]:
    server = HoldingServer(("127.0.0.1", 0), model, parse_faults(""), ServerOptions(), held=held)
    threading.Thread(target=server.serve_forever, args=(0.05,), name="holding-sim-server", daemon=True).start()
    try:
        yield server
    finally:
        server.release()
        stop_server(server)


class _RecordingHandler(_Handler):
    server: RecordingServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.record(body)
        # the sim's own handler reads the body again: hand it these bytes, then the connection back
        connection, self.rfile = self.rfile, io.BytesIO(body)
        try:
            super().do_POST()
        finally:
            self.rfile = connection


class RecordingServer(SimServer):
    """The sim server, also keeping each request's JSON body, so a test can read what a build sent."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.RequestHandlerClass = _RecordingHandler
        self.bodies: list[dict[str, Any]] = []
        self._bodies_lock = threading.Lock()

    def record(self, body: bytes) -> None:
        with self._bodies_lock:
            self.bodies.append(json.loads(body))

    def user_messages(self) -> list[str]:
        """The content of every request's user message, in arrival order."""
        with self._bodies_lock:
            return [m["content"] for body in self.bodies for m in body["messages"] if m["role"] == "user"]


@contextlib.contextmanager
def recording_server(sim: SimConfig, first_errors: dict[str, int] | None = None) -> Iterator[RecordingServer]:
    server = RecordingServer(("127.0.0.1", 0), SimModel(sim, first_errors=first_errors), parse_faults(""),
                             ServerOptions())
    threading.Thread(target=server.serve_forever, args=(0.05,), name="recording-sim-server", daemon=True).start()
    try:
        yield server
    finally:
        stop_server(server)


@contextlib.contextmanager
def refusing_urls(n: int = 1) -> Iterator[list[str]]:
    """`n` distinct loopback URLs whose connections are refused: each port is bound, so nothing else can take
    it while the block runs, and not listening."""
    with contextlib.ExitStack() as stack:
        urls = []
        for _ in range(n):
            bound = stack.enter_context(socket.socket())
            bound.bind(("127.0.0.1", 0))
            urls.append(f"http://127.0.0.1:{bound.getsockname()[1]}")
        yield urls


def wait_until_settled(server: WatchedServer) -> None:
    """Every request a killed build sent has been counted: the server has read each of its connections to the end.

    subtle: the listener accepts in order, so once a new connection is answered, every connection the build
    opened has been accepted (and counted as open); each closes when its handler reads the dead client's EOF."""
    with urllib.request.urlopen(f"{server.base_url}/_stats", timeout=EVENT_TIMEOUT_S) as response:
        response.read()
    wait_for(lambda: server.open_connections == 0, "the sim server to finish the killed build's connections")




def kill_once_stored(command: list[str], cwd: Path, count_stored: Callable[[], int], target: int, log: Path) -> None:
    """Start `command`, kill -9 it once `count_stored()` reaches `target`; fail at once if it exits first."""
    with open(log, "w") as err:
        process = subprocess.Popen(command, cwd=cwd, env=project_env(), stdout=subprocess.DEVNULL, stderr=err)
        try:
            def reached() -> bool:
                if process.poll() is not None:
                    pytest.fail(f"{command[1]} exited ({process.returncode}) before storing {target}:\n"
                                f"{log.read_text()[-3000:]}")
                return count_stored() >= target

            wait_for(reached, f"{command[1]} to store {target}")
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()


def kill_at_random_moments(server: WatchedServer, run_until: Callable[[int, int], None], stored: Callable[[], set[str]],
                           requested: Callable[[], Counter[str]], *, total: int, in_flight: int, seed: int) -> int:
    """Up to four rounds of: run until 1 to a third of what is missing is new (at least one; `run_until(target,
    round)` kills it there), then check the server saw no request for anything stored before, and that at most
    `in_flight` requests were lost. Returns how many rounds ended with work still missing (a test needs one)."""
    rng = random.Random(seed)
    partial_rounds = 0
    for round_number in range(4):
        before, requests_before = stored(), requested()
        missing = total - len(before)
        if missing == 0:  # a run that stored more than its target before the kill landed (a loaded machine) ends early
            break
        run_until(len(before) + rng.randint(1, max(1, missing // 3)), round_number)
        wait_until_settled(server)
        new_requests = set(requested() - requests_before)
        after = stored()
        assert not new_requests & before, "a resumed run asked again for something it had"
        assert len(new_requests - after) <= in_flight, "more than the requests in flight were lost"
        partial_rounds += len(after) < total
    return partial_rounds


def kill_and_resume(server: WatchedServer, command: list[str], root: Path, folder: Path, *, total: int,
                    concurrency: int, seed: int, logs: Path, finish: Callable[[], object]) -> None:
    """A paid stage's `command`, storing under root/folder, killed at random moments (kill_at_random_moments),
    then run to the end by `finish`: it asks for nothing stored before, and at least one kill landed mid-build."""
    def run_until(target: int, round_number: int) -> None:
        kill_once_stored(command, root, lambda: len(stored_under(root / folder)), target,
                         logs / f"build-{round_number}.log")

    partial_rounds = kill_at_random_moments(server, run_until, lambda: stored_under(root / folder),
                                            lambda: requests_by_key(server), total=total,
                                            in_flight=calls_at_risk(concurrency), seed=seed)
    before, requests_before = stored_under(root / folder), requests_by_key(server)
    finish()
    assert not set(requests_by_key(server) - requests_before) & before, "a stored call was requested again"
    assert partial_rounds >= 1, "no kill landed in the middle of a build; the test proved nothing"


def requests_by_key(server: str | SimServer) -> Counter[str]:
    """Requests the server has counted, by call key ("toy-01/c0/solve")."""
    base_url = server.base_url if isinstance(server, SimServer) else server
    with urllib.request.urlopen(f"{base_url}/_stats", timeout=60) as response:
        return Counter(json.loads(response.read())["by_sample"])


def ledger_in(folder: Path) -> CallLedger | None:
    """The one ledger a paid stage made under a dataset's folder (debates/toy, critiques/steps), if any."""
    found = list(folder.glob("*/ledger.json"))
    return CallLedger(found[0].parent) if found else None


def stored_keys(root: Path) -> set[str]:
    """"<item>/<key>" of every call stored in the ledger at `root` (none before it exists)."""
    if not (root / CallLedger.META).is_file():
        return set()
    ledger = CallLedger(root)
    return {f"{p.stem}/{key}" for p in (root / "calls").glob("*.tvf") for key in ledger.stored_keys(p.stem)}


def stored_under(folder: Path) -> set[str]:
    """stored_keys of the ledger under a dataset's folder, once a build has made it."""
    ledger = ledger_in(folder)
    return stored_keys(ledger.root) if ledger is not None else set()


def final_state(root: Path) -> dict[str, dict]:
    """Every stored record of the ledger at `root` but its latency, by item and key."""
    ledger = CallLedger(root)
    items = sorted(p.stem for p in (root / "calls").glob("*.tvf"))
    return {item: {key: dataclasses.replace(record, latency_s=0.0) for key, record in ledger.records(item).items()}
            for item in items}
