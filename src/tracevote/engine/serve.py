"""llama-cpp-python's server on a listening socket it inherits (tracevote.engine.loopback holds the port).

    python -m tracevote.engine.serve --listen-fd 3 [--count-tokens] --model models/tinymath.gguf ...

Everything after our two options is llama_cpp.server's own (its `--host` and `--port` are not used: the socket is
already bound). The app is llama_cpp.server's, built as its `__main__` builds it, and served by uvicorn on the
given socket (`uvicorn.Server.run(sockets=...)`, as a Gunicorn worker serves). `--count-tokens`: with
tracevote.engine.counting's per-completion count lines. Runs in the engine's interpreter only.
"""

from __future__ import annotations

import argparse
import socket
import sys


def main(argv: list[str] | None = None) -> None:
    import llama_cpp
    import llama_cpp.server.app as app
    import uvicorn
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--listen-fd", type=int, required=True)
    ours.add_argument("--count-tokens", action="store_true")
    own, rest = ours.parse_known_args(argv)
    theirs = argparse.ArgumentParser(prog="python -m tracevote.engine.serve")
    add_args_from_model(theirs, Settings)
    args = theirs.parse_args(rest)
    if own.count_tokens:
        from tracevote.engine.counting import install

        install(llama_cpp, app, lambda line: print(line, file=sys.stdout, flush=True))
    server_app = app.create_app(server_settings=parse_model_from_args(ServerSettings, args),
                                model_settings=[parse_model_from_args(ModelSettings, args)])
    listener = socket.socket(fileno=own.listen_fd)
    host, port = listener.getsockname()[:2]
    uvicorn.Server(uvicorn.Config(server_app, host=host, port=port)).run(sockets=[listener])


if __name__ == "__main__":
    main()
