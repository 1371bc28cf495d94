"""A loopback server that speaks DeepSeek's chat-completions JSON for the simulated model, with faults.

`POST /chat/completions` (also under /v1) answers like DeepSeek, errors included: 401 for a wrong key,
402 in no-balance mode, 400 "Model Not Exist" for a model outside the allow-list, 400/422 for bad
parameters, all as {"error": {"message", "type", "param", "code"}}. Any other path gets a web server's
404 page (HTML, no JSON), as a wrong model.base_url meets.

Two headers, which real servers ignore, mark a call: X-Tracevote-Sample names its key (the seed of its
response, and what faults are drawn for), and X-Tracevote-Kind its kind ("solve", or a kind a later method
registered in kinds.py), so the model answers each kind without reading the prompt. No kind header means
"solve" (old clients, curl); a kind nothing answers gets 400 in DeepSeek's error shape, naming the kind and
the known kinds. Every completion carries X-Tracevote-Simulated: 1, so a client always knows a simulated
reply from a real one (ledgers never mix them).

A request with `stream: true` gets server-sent events in HTTP chunks (sim/stream.py has the layout), made one at
a time: before each chunk the handler checks whether the client hung up, and stops making chunks when it has.
Without a pace, a stream is made as fast as the socket takes it, so when a client closes, the tokens already in
the socket buffers were generated too (up to ~1 MB on loopback). `tokens_per_s` makes each stream at most that
many tokens a second, as a real server generates them, and `send_buffer` shrinks the socket's send buffer: with
both, the server is at most a few tokens past the client when it notices the close, as vLLM and llama.cpp are.

Faults (429s, drops, truncated bodies, ...) follow a FaultPlan: see faults.py for the spec (a stream meets them
mid-stream). `GET /_stats` returns the request counts per sample, per kind and per outcome, the tokens streamed
per sample (generated_tokens) and how streams ended (streams).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from tracevote.core.profiles import PROFILES
from tracevote.core.simulated import KIND_HEADER, MODELS_OWNER, SAMPLE_HEADER, SIMULATED_HEADER, SOLVE
from tracevote.sim.faults import FaultPlan, half_chunk
from tracevote.sim.model import SimModel
from tracevote.sim.nchoices import choice_keys, choices_served, complete_n
from tracevote.sim.pace import Generation, client_gone, stalled
from tracevote.sim.refusals import auth_refusal, check_request, error_body
from tracevote.sim.render import Degrade
from tracevote.sim.request import ReasoningField
from tracevote.sim.stats import ServerStats
from tracevote.sim.stream import StreamEvent

_KEPT_ALIVE_SEND_BUFFER = 4 << 20  # bytes of send buffer a connection gets back after a stream shrank it
_CHAT_PATHS = ("/chat/completions", "/v1/chat/completions")
_MODELS_PATHS = ("/models", "/v1/models")
_NOT_FOUND_PAGE = (b"<html>\r\n<head><title>404 Not Found</title></head>\r\n"
                   b"<body>\r\n<center><h1>404 Not Found</h1></center>\r\n</body>\r\n</html>\r\n")


@dataclass(frozen=True)
class ServerOptions:
    """How strict the server is: a required key, a model allow-list, no balance, a lower top-k cap, and the
    provider whose rules it enforces (tracevote.core.profiles: "deepseek", "openai-chat", ...)."""

    api_key: str | None = None
    models: tuple[str, ...] | None = None
    no_balance: bool = False
    max_top_logprobs: int = 20
    profile: str = "deepseek"
    pace: Callable[[], None] | None = None  # called before each streamed chunk is made: a test steps a stream with it
    tokens_per_s: float | None = None  # a generation pace per stream, as a real server makes tokens; None: no pace
    send_buffer: int | None = None  # SO_SNDBUF of a streaming connection in bytes (the kernel's own when None)
    reasoning_parser: ReasoningField | None = None  # solve replies' thinking in this field, as vLLM's parser sends it
    ignore_n: bool = False  # answer one choice whatever `n` asks, as llama-cpp-python's server does (sim/nchoices.py)
    refuse_n: bool = False  # answer n > 1 with HTTP 500 "Only one completion choice is allowed", as llama-server does
    context_window: int | None = None  # every model's window; None: a known name's documented one (sim/context.py)


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], model: SimModel, faults: FaultPlan, options: ServerOptions,
                 log: Callable[[str], None] | None = None) -> None:
        super().__init__(address, _Handler)
        self.model = model
        self.faults = faults
        self.options = options
        self.stats = ServerStats()
        self.log = log

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Count instead of printing: a client that timed out and hung up is expected here."""
        exc = sys.exc_info()[1]
        label = "client gone" if isinstance(exc, ConnectionError) else f"handler error {type(exc).__name__}: {exc}"
        self.stats.outcome(label)
        if self.log is not None:
            self.log(f"{client_address}: {label}")


def serve(host: str, port: int, model: SimModel, faults: FaultPlan, options: ServerOptions | None = None, *,
          on_ready: Callable[[str], None] | None = None, log: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted; `on_ready` gets the base URL once the socket listens."""
    with SimServer((host, port), model, faults, options or ServerOptions(), log) as server:
        if on_ready is not None:
            on_ready(server.base_url)
        server.serve_forever()


def start_server(model: SimModel, faults: FaultPlan | None = None, options: ServerOptions | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> SimServer:
    """A server running in a background thread; stop it with `stop_server`."""
    server = SimServer((host, port), model, faults or FaultPlan(), options or ServerOptions())
    threading.Thread(target=server.serve_forever, args=(0.05,), name="sim-server", daemon=True).start()
    return server


def stop_server(server: SimServer) -> None:
    server.shutdown()
    server.server_close()


@contextlib.contextmanager
def running_server(model: SimModel, faults: FaultPlan | None = None, options: ServerOptions | None = None,
                   host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Yields the base URL of a server running in a background thread, for tests."""
    server = start_server(model, faults, options, host, port)
    try:
        yield server.base_url
    finally:
        stop_server(server)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients with a session expect
    disable_nagle_algorithm = True  # headers and body go out as two writes: without this, +40 ms each
    server: SimServer
    timeout = 120  # an idle keep-alive connection is closed after this

    def setup(self) -> None:
        super().setup()
        self.server.stats.connected()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log is not None:
            self.server.log(f"{self.address_string()} {format % args}")

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_stats":
            self._send_json(200, self.server.stats.snapshot())
        elif path in _MODELS_PATHS:
            refusal = auth_refusal(self.server.options, self.headers.get("Authorization"))
            if refusal is not None:
                self._send_json(refusal[0], refusal[1])
                return
            names = self.server.options.models or ("deepseek-v4-flash",)
            self._send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": MODELS_OWNER} for name in names]})
        else:
            self._send_not_found()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?", 1)[0] not in _CHAT_PATHS:
            self._send_not_found()
            return
        sample_key = self.headers.get(SAMPLE_HEADER)
        kind = self.headers.get(KIND_HEADER, SOLVE)
        counted_key, attempt = self.server.stats.begin(sample_key, kind)
        request, refusal = check_request(self.server.options, self.headers.get("Authorization"), kind, body)
        if refusal is not None:
            self.server.stats.outcome(str(refusal[0]))
            self._send_json(*refusal, {SIMULATED_HEADER: "1"})  # an error of the simulator is simulated too
            return
        fault = self.server.faults.choose(sample_key, attempt) if sample_key else None
        self.server.stats.outcome(fault or "ok")
        if fault in ("429", "500", "503"):
            self._send_status_fault(fault)
        elif fault == "drop" and not request.get("stream"):
            self.close_connection = True  # hang up without a word
        elif request.get("stream"):
            self._send_stream(request, sample_key, counted_key, kind, fault)
        else:
            self._send_completion(request, sample_key, counted_key if fault in (None, "slow") else None, kind, fault)

    def _send_status_fault(self, fault: str) -> None:
        if fault == "429":
            payload = error_body("Rate Limit Reached", "rate_limit_error", "rate_limit_exceeded")
            retry_after = f"{self.server.faults.retry_after_s:g}"
            self._send_json(429, payload, {"Retry-After": retry_after})
        elif fault == "500":
            self._send_json(500, error_body("Server Error", "server_error", "internal_error"))
        else:
            faults = self.server.faults
            headers = {"Retry-After": f"{faults.retry_after_s:g}"} if faults.overloaded_retry_after else {}
            self._send_json(503, error_body("Server Overloaded", "server_error", "overloaded"), headers)

    def _send_completion(self, request: dict[str, Any], sample_key: str | None, delivered_key: str | None,
                         kind: str, fault: str | None) -> None:
        """The reply, whole or as the fault makes it; one going out whole is counted as delivered to
        `delivered_key` before its bytes leave, so a client that has read it finds it in /_stats."""
        if fault == "slow":
            time.sleep(self.server.faults.slow_s)
        degrade: Degrade = "sentinel" if fault == "sentinel" else "nologprobs" if fault == "nologprobs" else "none"
        profile = PROFILES[self.server.options.profile]
        n = choices_served(request, profile, self.server.options.ignore_n)
        self.server.stats.answered(choice_keys(sample_key, n))
        reasoning_parser = self.server.options.reasoning_parser
        data = (complete_n(self.server.model, request, sample_key, n, degrade=degrade, kind=kind, profile=profile,
                           reasoning_parser=reasoning_parser)
                if n > 1 else self.server.model.complete_bytes(request, sample_key, degrade=degrade, kind=kind,
                                                               profile=profile, reasoning_parser=reasoning_parser))
        if fault == "malformed":  # what a proxy in the way sends: half a document, then its own page
            # subtle: the page starts with a line break, so even when the cut falls inside a JSON string
            # the document is invalid there, not merely cut short
            data = data[: len(data) // 2] + b"\r\n<html><body>502 Bad Gateway</body></html>\r\n"
        sent = data[: len(data) // 2] if fault in ("truncated", "cut") else data
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header(SIMULATED_HEADER, "1")
        self.send_header("Content-Length", str(len(data)))  # subtle: truncated promises more than it sends
        self.end_headers()
        if delivered_key is not None:
            self.server.stats.delivered_to(delivered_key)
        try:
            self.wfile.write(sent)
        except ConnectionError:
            if delivered_key is not None:
                self.server.stats.delivered_to(delivered_key, -1)
            raise
        if fault in ("truncated", "cut"):
            self.wfile.flush()
            self.close_connection = True

    def _send_stream(self, request: dict[str, Any], sample_key: str | None, counted_key: str, kind: str,
                     fault: str | None) -> None:
        """Server-sent events in HTTP chunks, made one at a time: a client gone stops the making. A fault
        (drop, slow, malformed, truncated, cut) strikes after faults.stream_after content chunks."""
        degrade: Degrade = "sentinel" if fault == "sentinel" else "nologprobs" if fault == "nologprobs" else "none"
        events = self.server.model.stream(request, sample_key, degrade=degrade, kind=kind,
                                          profile=PROFILES[self.server.options.profile],
                                          reasoning_parser=self.server.options.reasoning_parser)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header(SIMULATED_HEADER, "1")
        self.end_headers()
        if self.server.options.send_buffer is not None:
            self.wfile.flush()  # the headers go out before the buffer shrinks
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.server.options.send_buffer)
        ending = self._stream_events(events, counted_key, fault)
        # counted before the body's last chunk leaves, so a client that has read the stream finds it in /_stats
        self.server.stats.stream_ended(ending)
        if ending in ("finished", "slow") and fault not in ("nologprobs", "sentinel"):
            self.server.stats.delivered_to(counted_key)  # whole and valid, as a slow whole reply is
        if ending in ("finished", "malformed", "slow", "truncated"):
            self.wfile.write(b"0\r\n\r\n")
        if ending in ("drop", "cut", "client gone"):
            self.close_connection = True  # no end of the chunked body
        elif self.server.options.send_buffer is not None:
            # the connection's next reply is not held to this stream's small buffer: the kernel would have grown it
            # to tcp_wmem's ceiling (4 MiB by default; setsockopt asks half, the kernel doubles it)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _KEPT_ALIVE_SEND_BUFFER // 2)

    def _stream_events(self, events: Iterator[StreamEvent], counted_key: str, fault: str | None) -> str:
        """Writes the events; returns how the stream ended: "finished", "client gone" or the fault's kind."""
        pace, stats, strike_at = self.server.options.pace, self.server.stats, self.server.faults.stream_after
        generation = Generation(self.server.options.tokens_per_s)
        content_sent, struck = 0, False
        for event in events:
            if pace is not None:
                pace()
            if event.tokens and not generation.wait_for(event.tokens, self.connection):
                return "client gone"
            if client_gone(self.connection):
                return "client gone"
            data = event.data
            if event.tokens and content_sent == strike_at:
                struck = True
                if fault in ("drop", "truncated", "cut"):
                    with contextlib.suppress(ConnectionError):  # cut: the connection drops inside an HTTP chunk
                        self.wfile.write(half_chunk(data) if fault == "cut" else b"")
                    return fault
                if fault == "slow" and stalled(self.connection, self.server.faults.slow_s):
                    return "client gone"
                if fault == "malformed":  # half an event, as a proxy that cut it sends it
                    data = data[: len(data) // 2] + b"\n\n"
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            except ConnectionError:
                return "client gone"
            if event.tokens:
                content_sent += 1
                stats.streamed(counted_key, event.tokens)
        return fault if struck and fault in ("malformed", "slow") else "finished"

    def _send_not_found(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(_NOT_FOUND_PAGE)))
        self.end_headers()
        self.wfile.write(_NOT_FOUND_PAGE)

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = orjson.dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
