"""llama.cpp's OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`) on loopback, for as long as needed.

    with llamacpp_server(Path("models/tinymath.gguf"), log=Path("real/engine.log")) as server:
        ...  # server.base_url is "http://127.0.0.1:<port>/v1"

The server runs in its own process group, so stopping it stops everything it started, whatever ended the block:
an error, Ctrl-C, or a SIGTERM the caller turned into an exception (`stop_on_sigterm`). It is ready when GET
/v1/models answers; a server that dies first is reported with the tail of its log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import requests

from tracevote.core.errors import DataError
from tracevote.engine.counting import PREFIX as COUNT_PREFIX

PIN = "llama-cpp-python[server]==0.3.36"  # requirements-engine.txt: the version whose replies tests/fixtures hold
LOG_TAIL_LINES = 20
STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class EngineServer:
    base_url: str  # the OpenAI-compatible root, ".../v1"
    model_alias: str  # the `model` name the server answers to (and echoes in its replies)
    pid: int
    log: Path


def missing_engine_reason() -> str | None:
    """Why the engine cannot run in this interpreter (llama_cpp or its server extra not importable), else None."""
    for module, what in (("llama_cpp", "llama-cpp-python"), ("uvicorn", "its [server] extra"),
                         ("sse_starlette", "its [server] extra")):
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed ({module} is not importable): `make engine` installs {PIN}"
    return None


@contextlib.contextmanager
def llamacpp_server(model: Path, *, log: Path, model_alias: str = "tinymath", n_ctx: int = 2048,
                    threads: int = 2, ready_timeout_s: float = 300.0, count_tokens: bool = False
                    ) -> Iterator[EngineServer]:
    """The server for `model` on a free loopback port, ready; stopped (its whole process group) on leaving.

    `count_tokens`: started through tracevote.engine.counting, which logs the tokens the engine generated for each
    chat completion (read_counts reads them back), a closed stream's included.

    `n_ctx` may exceed the context the model was trained with: llama.cpp then warns and runs anyway, and text past
    that length is what the model makes of positions it never saw.
    """
    if not model.is_file():
        raise DataError(f"{model}: no such model file")
    reason = missing_engine_reason()
    if reason:
        raise DataError(reason)
    port = _free_port()
    launcher = "tracevote.engine.counting" if count_tokens else "llama_cpp.server"
    command = [sys.executable, "-m", launcher, "--model", str(model), "--model_alias", model_alias,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
               "--verbose", "False",
               # by default the server ends a stream early whenever another request waits for the model, without
               # its closing chunk: with two streams in flight nearly every one broke (docs/tinymath.md)
               "--interrupt_requests", "False"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        _wait_ready(process, base_url, log, ready_timeout_s)
        yield EngineServer(base_url=base_url, model_alias=model_alias, pid=process.pid, log=log)
    finally:
        stop_process_group(process)


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Inside the block a SIGTERM raises KeyboardInterrupt, so `finally` clauses (the server's stop) run."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group, SIGKILL after a grace period; returns once the process is reaped."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise DataError(f"llama.cpp's server exited with code {process.returncode} before it answered; the "
                            f"end of its log ({log}):\n{log_tail(log)}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{base_url}/models", timeout=2, proxies={"http": "", "https": ""}).ok:
                return
        time.sleep(0.2)
    raise DataError(f"llama.cpp's server did not answer {base_url}/models within {timeout_s:.0f} s; the end of its "
                    f"log ({log}):\n{log_tail(log)}")


def read_counts(log: Path) -> list[dict[str, Any]]:
    """The per-completion token counts a server started with `count_tokens` logged, in the order they ended."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return [orjson.loads(line[len(COUNT_PREFIX):]) for line in text.splitlines() if line.startswith(COUNT_PREFIX)]


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"
