"""A loopback stand-in for the Hugging Face datasets-server rows API, with scripted faults."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


@dataclass
class RowsAPI:
    """Serves `rows`; `faults` is consumed one per request: (status, headers) or None for a real page."""

    rows: list[dict]
    faults: list[tuple[int, dict[str, str]] | None] = field(default_factory=list)
    requests: list[tuple[float, dict[str, str]]] = field(default_factory=list)

    def respond(self, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        self.requests.append((time.monotonic(), query))
        fault = self.faults.pop(0) if self.faults else None
        if fault is not None:
            status, headers = fault
            return status, headers, json.dumps({"error": f"injected {status}"}).encode()
        offset, length = int(query["offset"]), int(query["length"])
        page = self.rows[offset: offset + min(length, 100)]
        body = {
            "features": [{"feature_idx": i, "name": k, "type": {"dtype": "string", "_type": "Value"}}
                         for i, k in enumerate(self.rows[0]) ] if self.rows else [],
            "rows": [{"row_idx": offset + i, "row": row, "truncated_cells": []} for i, row in enumerate(page)],
            "num_rows_total": len(self.rows),
            "num_rows_per_page": 100,
            "partial": False,
        }
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


@contextlib.contextmanager
def serve_rows(api: RowsAPI) -> Iterator[str]:
    """Run the API on 127.0.0.1 on a free port; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path != "/rows":
                self.send_error(404)
                return
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            status, headers, body = api.respond(query)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on 127.0.0.1 on a free port, in a thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
