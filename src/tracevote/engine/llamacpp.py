"""llama.cpp's OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`) on loopback, for as long as needed.

    with llamacpp_server(Path("models/tinymath.gguf"), log=Path("real/engine.log")) as server:
        ...  # server.base_url is "http://127.0.0.1:<port>/v1"

The server is served on a port this process holds for it from before it starts until after it stops
(tracevote.engine.loopback: no other server can take it), in its own process group, so stopping it stops everything
it started, whatever ended the block. It is ready when its own process is alive and GET /v1/models lists its
alias; a server that dies first, or answers under another name, is reported with the tail of its log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import orjson

from tracevote.core.errors import DataError
from tracevote.engine.counting import PREFIX as COUNT_PREFIX
from tracevote.engine.loopback import EngineServer, held_port_server

__all__ = ["EngineServer", "llamacpp_server", "missing_engine_reason", "read_counts"]

PIN = "llama-cpp-python[server]==0.3.36"  # requirements-engine.txt: the version whose replies tests/fixtures hold


def missing_engine_reason() -> str | None:
    """Why the engine cannot run in this interpreter (llama_cpp or its server extra not importable), else None."""
    for module, what in (("llama_cpp", "llama-cpp-python"), ("uvicorn", "its [server] extra"),
                         ("sse_starlette", "its [server] extra")):
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed ({module} is not importable): `make engine` installs {PIN}"
    return None


def llamacpp_server(model: Path, *, log: Path, model_alias: str = "tinymath", n_ctx: int = 2048,
                    threads: int = 1, ready_timeout_s: float = 300.0, count_tokens: bool = False
                    ) -> contextlib.AbstractContextManager[EngineServer]:
    """The server for `model` on a loopback port held for it (tracevote.engine.loopback), ready; stopped (its whole
    process group) on leaving.

    `count_tokens`: with tracevote.engine.counting's lines, which log the tokens the engine generated for each
    chat completion (read_counts reads them back), a closed stream's included.

    `threads`: llama.cpp's threads, for generating and for reading the prompt alike. One by default: the shipped
    model is so small that a second thread only waits at every step's barrier, spinning (docs/real-model.md:
    one thread halves the engine's CPU and is faster on 2 busy cores).

    `n_ctx` may exceed the context the model was trained with: llama.cpp then warns and runs anyway, and text past
    that length is what the model makes of positions it never saw.
    """
    if not model.is_file():
        raise DataError(f"{model}: no such model file")
    reason = missing_engine_reason()
    if reason:
        raise DataError(reason)

    def command(fd: int) -> list[str]:
        return [sys.executable, "-m", "tracevote.engine.serve", "--listen-fd", str(fd),
                *(["--count-tokens"] if count_tokens else []),
                "--model", str(model), "--model_alias", model_alias, "--n_ctx", str(n_ctx),
                "--n_threads", str(threads), "--n_threads_batch", str(threads), "--verbose", "False",
                # by default the server ends a stream early whenever another request waits for the model, without
                # its closing chunk: with two streams in flight nearly every one broke (docs/tinymath.md)
                "--interrupt_requests", "False"]

    return held_port_server(command, log=log, model_alias=model_alias, name="llama.cpp's server",
                            ready_timeout_s=ready_timeout_s)


def read_counts(log: Path) -> list[dict[str, Any]]:
    """The per-completion token counts a server started with `count_tokens` logged, in the order they ended."""
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return [orjson.loads(line[len(COUNT_PREFIX):]) for line in text.splitlines() if line.startswith(COUNT_PREFIX)]
