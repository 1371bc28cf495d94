"""llama-cpp-python's server, with one log line per chat completion counting the tokens the engine generated.

    python -m tracevote.engine.serve --listen-fd 3 --count-tokens --model models/tinymath.gguf ...

A streamed reply the client closes ends without usage, and llama.cpp prints its perf lines only after a whole
completion; so nothing the server says tells how far it went. `install` (tracevote.engine.serve calls it with
`--count-tokens`) wraps three functions of llama-cpp-python 0.3.36, the pinned version (no behaviour changed) and
prints, when each completion ends, a line

    tracevote-engine-count {"request": 7, "key": "p/3", "seed": ..., "stream": true, "sampled": 18, ...}

- `sampled`: tokens the engine sampled for the request (calls of Llama.sample: each is one generated token);
- `decoded`, `prompt_decoded`: llama.cpp's own perf counters (n_eval, n_p_eval: single-token decodes and the
  prompt tokens decoded in batches), reset when the request starts;
- `chunks`: chunks the server produced; `ended`: "whole" (the completion ran to its end) or "closed" (the stream
  stopped early: the client went away);
- `key`: the X-Tracevote-Sample header of a streamed request (the trace's "<problem>/<index>"), else null.

Requests are served one at a time (the server holds one model behind a lock), so the counts of one request are
its own. The llama-cpp-python server pulls a streamed completion a chunk at a time as it sends them, so when the
client closes the stream the generator is not pulled again: `sampled` is where the engine stopped.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import orjson

PREFIX = "tracevote-engine-count "
SAMPLE_HEADER = "x-tracevote-sample"  # tracevote.core.simulated.SAMPLE_HEADER, as Starlette's headers spell it


class _Counts:
    """Tokens sampled since the server started (requests are served one at a time)."""

    def __init__(self) -> None:
        self.sampled = 0
        self.requests = itertools.count()


def install(llama_cpp: Any, app: Any, out: Callable[[str], None]) -> None:
    """Wrap Llama.sample, Llama.create_chat_completion and the server's streamed-reply publisher."""
    counts = _Counts()
    current: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("tracevote_count", default=None)
    sample, create, publisher = llama_cpp.Llama.sample, llama_cpp.Llama.create_chat_completion, app.get_event_publisher

    def counted_sample(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = sample(self, *args, **kwargs)
        counts.sampled += 1
        return token

    def report(state: dict[str, Any]) -> None:
        out(PREFIX + orjson.dumps(state).decode())

    def counted_create(self: Any, *args: Any, **kwargs: Any) -> Any:
        base = counts.sampled
        llama_cpp.llama_perf_context_reset(self._ctx.ctx)
        holder = current.get()
        state: dict[str, Any] = {"request": next(counts.requests), "key": (holder or {}).get("key"),
                                 "seed": kwargs.get("seed"), "stream": bool(kwargs.get("stream")), "chunks": 0,
                                 "sampled": 0, "decoded": 0, "prompt_decoded": 0, "ended": "closed"}

        def measure() -> None:
            perf = llama_cpp.llama_perf_context(self._ctx.ctx)
            state.update(sampled=counts.sampled - base, decoded=perf.n_eval, prompt_decoded=perf.n_p_eval)

        result = create(self, *args, **kwargs)
        if not kwargs.get("stream"):
            measure()
            state.update(chunks=1, ended="whole")
            report(state)
            return result
        if holder is not None:
            holder["state"] = state  # the publisher reports it when the stream ends, however it ends

        def chunks() -> Iterator[Any]:
            for chunk in result:
                measure()
                state["chunks"] += 1
                yield chunk
            measure()
            state["ended"] = "whole"

        return chunks()

    async def counted_publisher(*args: Any, **kwargs: Any) -> None:
        request = kwargs.get("request")
        holder: dict[str, Any] = {"key": request.headers.get(SAMPLE_HEADER) if request is not None else None}
        token = current.set(holder)  # copied into the worker thread that calls create_chat_completion
        try:
            await publisher(*args, **kwargs)
        finally:
            current.reset(token)
            if "state" in holder:
                report(holder["state"])

    llama_cpp.Llama.sample = counted_sample
    llama_cpp.Llama.create_chat_completion = counted_create
    app.get_event_publisher = counted_publisher
