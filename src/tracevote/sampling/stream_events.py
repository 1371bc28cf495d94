"""Turning a stream's events into tokens: each `data:` event of a chat-completions stream decoded (orjson) and its
delta, logprobs items, finish_reason and usage taken in.

A chunk's `logprobs.content` items are held until their batch goes to the observer, then read together by ingest's
own item reader (rows sorted best first and cut to k), so a streamed trace has the tokens the non-streamed parse of
the same completion gives. What is wrong with a chunk raises TransientError with the cause a retry is counted by:
"malformed chunk" (not JSON, not an object, no choices list, items that are not a list or not OpenAI's layout),
"stream error" (the server's error object, mid-stream).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from sseclient import SSEClient

from tracevote.core.retry import TransientError
from tracevote.core.simulated import FINGERPRINT_PREFIX
from tracevote.sampling.ingest import read_items
from tracevote.sampling.ingest_fast import reasoning_text, usage_counts

DONE = "[DONE]"
Tokens = tuple[list[str], np.ndarray, np.ndarray, list[list[str]] | None]  # tokens, chosen, top (float64), top tokens


@dataclass
class EventReader:
    """What a stream's events said so far; the items of the chunks read since the last batch in `pending`.

    >>> reader = EventReader(k=1, keep_top_tokens=False, redact=str)
    >>> reader.event('{"choices":[{"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,'
    ...              '"top_logprobs":[{"token":"Hi","logprob":-0.5}]}]},"finish_reason":"stop"}]}')
    >>> reader.event("[DONE]")
    >>> tokens, chosen, top, _ = reader.take_tokens()
    >>> (reader.text, tokens, chosen.tolist(), reader.finish_reason, reader.done)
    (['Hi'], ['Hi'], [-0.5], 'stop', True)
    """

    k: int
    keep_top_tokens: bool
    redact: Callable[[str], str]
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)  # the deltas' reasoning_content (or reasoning)
    pending: list[list[Any]] = field(default_factory=list)  # each chunk's logprobs.content items, not handed over
    chunks: int = 0  # data events read, [DONE] not counted
    finish_reason: str | None = None
    usage: tuple[int, int] | None = None
    done: bool = False  # the server's `data: [DONE]` arrived
    simulated: bool = False  # a chunk's system_fingerprint is the simulated model's

    def event(self, data: str) -> None:
        """One event's data taken in."""
        if data == DONE:
            self.done = True
            return
        self.chunks += 1
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise self.malformed(f"is not JSON ({exc}): {data[:80]!r}") from None
        if not isinstance(chunk, dict):
            raise self.malformed(f"is not a JSON object: {data[:80]!r}")
        if chunk.get("error") is not None:
            raise TransientError("stream error", f"the server sent an error in chunk {self.chunks}: "
                                                 f"{self.redact(_error_text(chunk['error']))}")
        if str(chunk.get("system_fingerprint", "")).startswith(FINGERPRINT_PREFIX):
            self.simulated = True
        self.usage = usage_counts(chunk) or self.usage
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise self.malformed("has no choices list")
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str):
            self.text.append(content)
        thought = reasoning_text(delta)
        if thought:
            self.reasoning.append(thought)
        logprobs = choice.get("logprobs")
        items = logprobs.get("content") if isinstance(logprobs, dict) else None
        if items:
            if not isinstance(items, list):
                raise self.malformed("logprobs.content is not a list")
            self.pending.append(items)
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]

    def take_tokens(self) -> Tokens:
        """The held chunks' tokens, chosen and top logprobs (float64, rows best first, k wide) and top tokens;
        nothing is held after."""
        pending, self.pending = self.pending, []
        try:
            return read_items([item for items in pending for item in items], self.k, self.keep_top_tokens)[:4]
        except TransientError as exc:
            raise self.malformed(exc.detail) from None

    def malformed(self, what: str) -> TransientError:
        return TransientError("malformed chunk", f"chunk {self.chunks} {what}")


def event_data(reads: Iterable[bytes]) -> Iterator[str]:
    """The data of each server-sent event in `reads` (the stream's bytes as they were read, split anywhere), by
    sseclient-py's parser: its `data:` lines joined by "\\n"; comments, other fields and events without data
    skipped; the last event given even when the stream ended before its blank line. A line that is not UTF-8 is a
    malformed chunk.

    >>> list(event_data([b": keep-alive\\n\\ndata: {\\"a\\"", b":1}\\r\\n\\r\\ndata: [DONE]\\n\\n"]))
    ['{"a":1}', '[DONE]']
    """
    try:
        for event in SSEClient(reads).events():
            yield event.data
    except UnicodeDecodeError as exc:
        raise TransientError("malformed chunk", f"an event is not UTF-8 ({exc})") from None


def _error_text(error: Any) -> str:
    """error.message of an OpenAI-style error object, else the object itself, shortened."""
    message = error.get("message") if isinstance(error, dict) else error
    return " ".join(str(message).split())[:300]
