"""A server process on a loopback port this process holds from before the server starts until after it stops.

    with held_port_server(lambda fd: ["python", "-m", "my.server", "--listen-fd", str(fd)], log=log,
                          model_alias="tinymath", name="my server") as server:
        ...  # server.base_url is "http://127.0.0.1:<port>/v1"; only that process can answer on it

The port is bound and listening here (port 0: the kernel picks a free one) and the listening socket is handed to
the server as an inherited file descriptor, so there is no moment when another server could take the port: not
before the server starts, not while it loads, and not after it dies (this process keeps the socket open until the
server's group is stopped, so a request meets a queue that never answers, never another server). The server runs
in its own session and process group; leaving the block stops the group, whatever ended the block.

Ready when the server's own process is alive and GET /v1/models lists `model_alias`; a server that exits first,
or answers under another name, is refused in one line with the end of its log.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tracevote.core.errors import DataError
from tracevote.engine.processes import own_group

LOG_TAIL_LINES = 20
HOST = "127.0.0.1"


@dataclass(frozen=True)
class EngineServer:
    base_url: str  # the OpenAI-compatible root, ".../v1"
    model_alias: str  # the `model` name the server answers to (and echoes in its replies)
    pid: int
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)
    name: str = "llama.cpp's server"

    def exit_code(self) -> int | None:
        """The server's exit code once it has exited, None while it runs (or when it is not ours to watch)."""
        return None if self.process is None else self.process.poll()


@contextlib.contextmanager
def held_port_server(command: Callable[[int], list[str]], *, log: Path, model_alias: str, name: str,
                     ready_timeout_s: float = 300.0) -> Iterator[EngineServer]:
    """`command(fd)` started on a loopback socket bound here and inherited as `fd`, ready; stopped on leaving."""
    with listening_socket() as listener:
        fd = listener.fileno()
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as sink, own_group(command(fd), stdout=sink, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, pass_fds=(fd,)) as process:
            server = EngineServer(base_url=f"http://{HOST}:{listener.getsockname()[1]}/v1", model_alias=model_alias,
                                  pid=process.pid, log=log, process=process, name=name)
            wait_ready(server, ready_timeout_s)
            yield server


@contextlib.contextmanager
def listening_socket() -> Iterator[socket.socket]:
    """A TCP socket listening on a free loopback port, closed on leaving."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((HOST, 0))
        listener.listen(socket.SOMAXCONN)
        yield listener
    finally:
        listener.close()


def wait_ready(server: EngineServer, timeout_s: float) -> None:
    """Until GET /v1/models answers from `server`'s own live process and lists its alias; DataError otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        check_alive(server, "before it answered")
        models = models_reply(server.base_url)
        if models is not None:
            check_alive(server, "as it answered")  # a reply is trusted only from a server still running
            check_identity(server, models)
            return
        time.sleep(0.2)
    raise DataError(f"{server.name} did not answer {server.base_url}/models within {timeout_s:.0f} s; the end of its "
                    f"log ({server.log}):\n{log_tail(server.log)}")


def models_reply(base_url: str) -> object | None:
    """GET /v1/models's JSON, or None while nothing answers it."""
    try:
        reply = requests.get(f"{base_url}/models", timeout=2, proxies={"http": "", "https": ""})
        return reply.json() if reply.ok else None
    except (requests.RequestException, ValueError):
        return None


def check_alive(server: EngineServer, when: str) -> None:
    code = server.exit_code()
    if code is not None:
        raise DataError(f"{server.name} (pid {server.pid}) exited with code {code} {when}; the end of its log "
                        f"({server.log}):\n{log_tail(server.log)}")


def check_identity(server: EngineServer, models: object) -> None:
    entries = models.get("data") if isinstance(models, dict) else None
    names = [entry.get("id") for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []
    if server.model_alias not in names:
        raise DataError(f"{server.base_url}/models answers {names or models!r}, not the model {server.model_alias!r} "
                        f"{server.name} (pid {server.pid}) was started with: not the server this run started")


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"
