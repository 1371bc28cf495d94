"""What surrounds the engine of `make real`: the port held for it, the readiness check that trusts only its own
live server, and the signals that stop the run (the stage first, then the engine, nothing left behind).

Against a stand-in server (tests/engine/standin.py) on the same held socket and the same run_real, so these run
without llama.cpp; tests/engine/test_real_engine.py runs the real engine through the same code.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import requests

from tests.conftest import wait_for
from tests.engine.standin import terminal_job_signals
from tests.gate_proxy import DIRECT
from tracevote.core.errors import DataError
from tracevote.engine.loopback import EngineServer, held_port_server
from tracevote.engine.processes import live_members

STANDIN = Path(__file__).with_name("standin.py")
# every address and port-sharing option another server could try the port with
IMPOSTOR_BINDS = [("0.0.0.0", socket.SO_REUSEADDR), ("127.0.0.1", socket.SO_REUSEPORT),
                  ("0.0.0.0", socket.SO_REUSEPORT)]
RUN_TIMEOUT_S = 600  # a whole stand-in run on a busy machine: only reached when something hangs


def standin(log: Path, *options: str, alias: str = "tinymath") -> AbstractContextManager[EngineServer]:
    def command(fd: int) -> list[str]:
        return [sys.executable, str(STANDIN), "serve", "--listen-fd", str(fd), "--alias", alias, *options]

    return held_port_server(command, log=log, model_alias="tinymath", name="the stand-in engine")


def log_lines(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.is_file() else []


def test_no_other_server_can_take_the_engines_port_while_it_starts(tmp_path: Path) -> None:
    """The port is bound before the engine starts: a server that tries to listen on it while the engine is still
    loading (the gap `make real` used to leave between choosing a port and llama.cpp binding it) cannot, and the
    replies the run gets are the engine's own."""
    gate, log = tmp_path / "gate", tmp_path / "engine.log"
    os.mkfifo(gate)
    started: list[EngineServer] = []
    done = threading.Event()

    def run_engine() -> None:
        with standin(log, "--gate", str(gate)) as server:
            started.append(server)
            done.wait(RUN_TIMEOUT_S)

    runner = threading.Thread(target=run_engine)
    runner.start()
    try:
        wait_for(lambda: any(line.startswith("standin: port ") for line in log_lines(log)), "the engine to start")
        port = int(log_lines(log)[0].removeprefix("standin: port "))
        with pytest.raises(OSError, match="Address already in use"):
            HTTPServer(("127.0.0.1", port), BaseHTTPRequestHandler)
        for host, option in IMPOSTOR_BINDS:  # nor with the socket options that share a port
            with socket.socket() as impostor, pytest.raises(OSError, match="Address already in use"):
                impostor.setsockopt(socket.SOL_SOCKET, option, 1)
                impostor.bind((host, port))
        with open(gate, "w", encoding="utf-8"):  # the engine has loaded: it serves now
            pass
        wait_for(lambda: bool(started), "the engine to answer")
        assert started[0].base_url == f"http://127.0.0.1:{port}/v1"
        models = requests.get(f"{started[0].base_url}/models", timeout=30, proxies=DIRECT).json()
        assert [entry["id"] for entry in models["data"]] == ["tinymath"]
    finally:
        done.set()
        runner.join(RUN_TIMEOUT_S)
    assert live_members(started[0].pid) == []


@pytest.mark.parametrize(("options", "alias", "refusal"), [
    (["--exit", "3"], "tinymath", r"the stand-in engine \(pid \d+\) exited with code 3 before it answered"),
    ([], "impostor", r"answers \['impostor'\], not the model 'tinymath' the stand-in engine \(pid \d+\) was started "
                     r"with: not the server this run started"),
])
def test_a_server_that_is_not_the_one_started_is_refused(tmp_path: Path, options: list[str], alias: str,
                                                         refusal: str) -> None:
    log = tmp_path / "engine.log"
    with pytest.raises(DataError, match=refusal) as caught, standin(log, *options, alias=alias):
        pytest.fail("the block ran against a server that is not the one started")
    pid = int(re.search(r"\(pid (\d+)\)", str(caught.value)).group(1))
    assert live_members(pid) == []


def start_real(scratch: Path, *options: str) -> subprocess.Popen[str]:
    """The stand-in `make real` in a session of its own, as a terminal's job is."""
    return subprocess.Popen([sys.executable, str(STANDIN), "real", str(scratch), *options], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=terminal_job_signals)


def pids(pattern: str, text: str) -> list[int]:
    return [int(pid) for pid in re.findall(pattern, text)]


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=lambda sig: sig.name)
def test_a_stop_signal_stops_the_stage_first_then_the_engine(tmp_path: Path, sig: signal.Signals) -> None:
    """The terminal closing (SIGHUP), `kill` (SIGTERM) or Ctrl-C (SIGINT) while a stage waits on the engine: the
    stage is stopped and gone before the engine is told to stop, the engine after it, and the command exits
    128 + the signal's number, leaving no process of dvc's group or the engine's."""
    log = tmp_path / "real-engine.log"
    run = start_real(tmp_path / "real")
    try:
        wait_for(lambda: "standin: holding POST /v1/chat/completions" in log_lines(log), "a stage to call the engine")
        run.send_signal(sig)
        out, err = run.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 128 + sig, out[-2000:] + err[-2000:]
    closing = err.strip().splitlines()[-1]
    assert re.fullmatch(rf"real: stopped by {sig.name}: `dvc repro report` \(pid \d+\) stopped, then the stand-in "
                        rf"engine \(pid \d+\) stopped", closing), err[-2000:]
    lines = log_lines(log)
    assert lines.index("standin: client gone") < lines.index("standin: SIGTERM")  # the stage went first
    for pid in pids(r"\(pid (\d+)\)", closing):
        assert live_members(pid) == [], pid


def test_an_engine_that_dies_mid_run_ends_the_run_in_one_line(tmp_path: Path) -> None:
    """The engine exits while a stage waits on it: the run stops the stage at once and says so in one line (and
    the end of the engine's log), instead of letting the stage wait on a port no server answers."""
    run = start_real(tmp_path / "real", "--die-on-post")
    out, err = run.communicate(timeout=RUN_TIMEOUT_S)
    assert run.returncode == 2, out[-2000:] + err[-2000:]
    refusal = next(line for line in err.splitlines() if line.startswith("error: "))
    assert re.fullmatch(r"error: real: the stand-in engine \(pid \d+\) exited with code 3 while `dvc repro report` "
                        r"\(pid \d+\) ran; it is stopped and the run ends here; the end of the server's log \(.*\):",
                        refusal), err[-2000:]
    assert "standin: dying" in err
    for pid in pids(r"\(pid (\d+)\)", refusal):
        assert live_members(pid) == [], pid
