"""A reasoning parser's split of a solve reply, as vLLM's and SGLang's servers make it (`--reasoning-parser`).

A server with a reasoning parser sends a reasoning model's thinking in `message.reasoning_content` (SGLang,
DeepSeek, vLLM before it renamed the field) or `message.reasoning` (newer vLLM), and only the final answer in
`message.content`; streamed, each chunk's delta carries the one or the other. Its `logprobs.content` still lists
every generated token in order, thinking first (docs/endpoints.md, split thinking). The simulated trace's thinking
is its body and its answer is the closing sentence that boxes it (tokens.answer_tokens), so with the option the
same tokens, with the same logprobs, are sent split there; a trace cut at max_tokens before its closing sentence
has no content (`null`, as vLLM sends it). The simulated model writes no `<think>` tags, so nothing is dropped.

    message_fields("reasoning_content", " so x", "\\n\\nTherefore ... \\boxed{5}")
    -> b'"reasoning_content":" so x","content":"\\n\\nTherefore ... \\boxed{5}"'
"""

from __future__ import annotations

from typing import get_args

import orjson

from tracevote.sim.request import ReasoningField
from tracevote.sim.tokens import Trace, answer_tokens

REASONING_FIELDS: tuple[str, ...] = get_args(ReasoningField)


def answer_start(trace: Trace, n_tokens: int) -> int:
    """The index of the trace's first answer token (its closing sentence), or n_tokens when cut before it."""
    return min(n_tokens, trace.length - len(answer_tokens(trace.answer)))


def message_fields(parser: ReasoningField | None, reasoning: str, content: str) -> bytes:
    """The message's text fields as JSON members: the content alone without a parser (the two joined)."""
    if parser is None:
        return b'"content":' + orjson.dumps(reasoning + content)
    return (b'"' + parser.encode() + b'":' + orjson.dumps(reasoning) + b',"content":'
            + (orjson.dumps(content) if content else b"null"))


def delta_field(parser: ReasoningField | None, index: int, start: int) -> str:
    """The delta field a streamed solve reply's token `index` goes in: the parser's field before `start`."""
    return parser if parser is not None and index < start else "content"
