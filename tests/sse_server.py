"""A loopback chat-completions server that writes recorded server-sent-event bytes, piece by piece.

Each piece goes out as its own HTTP/1.1 chunk and is flushed, so the client reads a split exactly where the
script splits it. `paced` holds each next piece back until the test says go (`go()`, from the client's
observer) or the client closes the connection, which the handler records: `written` pieces, `client_closed`.

The server answers one request per connection and says so (`Connection: close`). After a body that ended whole it
keeps the connection until the client closes it or sends on it, then closes it unanswered: a client that sent its
next request (a retry) on a connection the server said it closes fails every time, not only when it wins the
race against the server's close.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import EVENT_TIMEOUT_S


@dataclass
class SSEScript:
    pieces: list[bytes]
    paced: bool = False
    drop: bool = False  # end by closing the connection without the last (empty) HTTP chunk
    chunked: bool = True  # False: the body as written, ended by closing the connection (no chunked framing)
    cut_chunk: bool = False  # the last piece's HTTP chunk promises more bytes than it has (with drop: a cut)
    status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)
    written: int = 0  # pieces written
    client_closed: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)  # the handler is done, either way

    def __post_init__(self) -> None:
        self._go_read, self._go_write = os.pipe()

    def go(self) -> None:
        """Let the next piece out (paced scripts)."""
        os.write(self._go_write, b"g")

    def wait_for_turn(self, connection: socket.socket) -> bool:
        """True to write the next piece; False when the client has closed the connection."""
        ready, _, _ = select.select([connection, self._go_read], [], [], EVENT_TIMEOUT_S)
        if connection in ready and not connection.recv(1, socket.MSG_PEEK):
            self.client_closed.set()
            return False
        if self._go_read in ready:
            os.read(self._go_read, 1)
            return True
        return False  # nothing at all within the timeout: the test fails on what it expected


def split_every(text: bytes, size: int) -> list[bytes]:
    """`text` cut every `size` bytes, regardless of lines, events or UTF-8 characters."""
    return [text[i:i + size] for i in range(0, len(text), size)]


def events(text: bytes) -> list[bytes]:
    """`text` cut after each event's blank line: one piece per server-sent event."""
    pieces = [piece + b"\n\n" for piece in text.split(b"\n\n") if piece]
    return pieces


@contextlib.contextmanager
def serve_sse(script: SSEScript) -> Iterator[str]:
    """The script served at {url}/v1/chat/completions; yields the base URL ending in /v1."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            script.requests.append({"body": json.loads(self.rfile.read(length)), "headers": dict(self.headers)})
            self.close_connection = True
            try:
                self._stream()
            finally:
                script.finished.set()

        def _stream(self) -> None:
            self.send_response(script.status)
            self.send_header("Content-Type", "text/event-stream" if script.status == 200 else "application/json")
            if script.chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for n, piece in enumerate(script.pieces):
                if script.paced and n > 1 and not script.wait_for_turn(self.connection):
                    return
                try:
                    self.wfile.write(self._framed(piece, cut=script.cut_chunk and n == len(script.pieces) - 1))
                    self.wfile.flush()
                except OSError:
                    script.client_closed.set()
                    return
                script.written += 1
            if script.chunked and not script.drop:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                select.select([self.connection], [], [], EVENT_TIMEOUT_S)  # the client's close, or its next request

        def _framed(self, piece: bytes, *, cut: bool) -> bytes:
            if not script.chunked:
                return piece
            return b"%x\r\n%s" % (len(piece) + 100, piece) if cut else b"%x\r\n%s\r\n" % (len(piece), piece)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()  # a quick shutdown
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
