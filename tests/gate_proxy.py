"""A loopback HTTP proxy in front of a real server that counts requests and can hold them at a gate.

A test sets `hold_after(n)`: requests after the n-th wait until `release()`, so a client can be stopped at an exact
point (all its slots waiting at the gate) instead of at a moment chosen by a clock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

DIRECT = {"http": "", "https": ""}  # loopback: never through a proxy from the environment


@dataclass
class Gate:
    upstream: str  # e.g. http://127.0.0.1:8000 (no path)
    posts: int = 0  # POST requests received since the last reset
    waiting: int = 0  # requests held at the gate now
    _limit: int | None = None
    _open: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._open.set()
        self._changed = threading.Condition(self._lock)

    def hold_after(self, count: int) -> None:
        with self._lock:
            self._limit = count
            self._open.clear()

    def release(self) -> None:
        with self._lock:
            self._limit = None
            self._open.set()

    def reset(self) -> None:
        with self._lock:
            self.posts = 0

    def wait_for_waiting(self, count: int, timeout_s: float = 120.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.waiting >= count, timeout=timeout_s):
                raise AssertionError(f"{self.waiting} requests reached the gate within {timeout_s} s, not {count}")

    def admit(self) -> None:
        with self._changed:
            self.posts += 1
            held = self._limit is not None and self.posts > self._limit
            if held:
                self.waiting += 1
                self._changed.notify_all()
        if held:
            self._open.wait()
            with self._changed:
                self.waiting -= 1


@contextlib.contextmanager
def gate_proxy(upstream: str) -> Iterator[tuple[str, Gate]]:
    """(the proxy's base URL, its gate) for `upstream`, on a free loopback port."""
    gate = Gate(upstream.rstrip("/"))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._forward("GET", b"")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            gate.admit()
            self._forward("POST", body)

        def _forward(self, method: str, body: bytes) -> None:
            reply = requests.request(method, gate.upstream + self.path, data=body or None, timeout=600,
                                     headers={"Content-Type": "application/json"}, proxies=DIRECT)
            with contextlib.suppress(OSError):  # the client may be gone (killed): nothing to answer
                self.send_response(reply.status_code)
                self.send_header("Content-Type", reply.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", gate
    finally:
        gate.release()
        server.shutdown()
        server.server_close()
