"""A stand-in for llama.cpp's server, and `make real`'s run against it, for the tests of what surrounds the engine
(the held port, the readiness check, the signals) where the engine is not installed.

    python tests/engine/standin.py serve --listen-fd 3 --alias tinymath [--gate FIFO] [--die-on-post] [--exit N]
    python tests/engine/standin.py real SCRATCH [--die-on-post]

`serve`: an HTTP server on the inherited listening socket (as tracevote.engine.loopback hands it). It prints
`standin: port <port>`; with --gate it serves only once a writer opens the FIFO; GET /v1/models lists --alias;
a POST is held, unanswered, until its client goes away (`standin: holding POST ...`, then `standin: client gone`),
or with --die-on-post the server exits with code 3 on the first one. SIGTERM: `standin: SIGTERM`, exit 0.

`real`: tracevote.cli.real.run_real on the scratch project SCRATCH (2 problems x 2 traces, DeepConf), with this
stand-in as its engine, through the entry point `python -m tracevote` uses; exits with its code.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ALIAS = "tinymath"


def say(line: str) -> None:
    print(f"standin: {line}", flush=True)


def terminal_job_signals() -> None:
    """Popen's preexec_fn for a command that stands for a terminal's job: SIGHUP and SIGINT at their defaults,
    whatever the test runner inherited (`nohup`, a shell's background job, which ignore them)."""
    for signum in (signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)


def serve(args: argparse.Namespace) -> None:
    listener = socket.socket(fileno=args.listen_fd)
    say(f"port {listener.getsockname()[1]}")
    if args.exit is not None:
        sys.exit(args.exit)

    def on_sigterm(signum: int, frame: object) -> None:
        say("SIGTERM")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    if args.gate:
        with open(args.gate, encoding="utf-8"):  # blocks until the test opens it for writing
            pass
    server = ThreadingHTTPServer((listener.getsockname()[0], 0), handler(args), bind_and_activate=False)
    server.socket = listener
    server.serve_forever()


def handler(args: argparse.Namespace) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": args.alias, "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            say(f"holding POST {self.path}")
            if args.die_on_post:
                say("dying")
                os._exit(3)
            while self.connection.recv(1024):  # the client sends nothing more: b"" once it has gone
                pass
            say("client gone")
            self.close_connection = True

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def real(args: argparse.Namespace) -> int:
    from tracevote.cli.real import RealRun, run_real
    from tracevote.core.entry import stage_main
    from tracevote.engine.loopback import held_port_server

    extra = ["--die-on-post"] if args.die_on_post else []

    def command(fd: int) -> list[str]:
        return [sys.executable, __file__, "serve", "--listen-fd", str(fd), "--alias", ALIAS, *extra]

    def engine(log: Path):
        return held_port_server(command, log=log, model_alias=ALIAS, name="the stand-in engine")

    code = 0

    def run() -> None:
        nonlocal code
        code = run_real(REPO, Path(args.scratch), RealRun(problems=2, traces=2, debates=1, method="deepconf"),
                        engine=engine)

    stage_main(run)
    return code


def main() -> int:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    served = commands.add_parser("serve")
    served.add_argument("--listen-fd", type=int, required=True)
    served.add_argument("--alias", default=ALIAS)
    served.add_argument("--gate")
    served.add_argument("--die-on-post", action="store_true")
    served.add_argument("--exit", type=int)
    run = commands.add_parser("real")
    run.add_argument("scratch")
    run.add_argument("--die-on-post", action="store_true")
    args = parser.parse_args()
    if args.command == "serve":
        serve(args)
        return 0
    return real(args)


if __name__ == "__main__":
    sys.exit(main())
