"""A prompt's tokens, counted before it is paid for, offline.

For a model whose provider's tokenizer ships offline (OpenAI's cl100k_base and o200k_base, bundled in the
`bpe-openai` wheel: nothing is downloaded, unlike tiktoken's first use) the count is exact for the text, plus the
chat template's tokens. For any other model it is a bound: a byte-level BPE or SentencePiece token covers at least
one byte of the text, so the UTF-8 byte count can only over-count (about 3-4x on English and LaTeX), and a margin
per message covers the template's role markers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracevote.core.context_windows import Encoding, known_model

PER_MESSAGE_TOKENS = 4  # OpenAI's documented chat overhead is 3 a message; one more for safety
BOUND_PER_MESSAGE_TOKENS = 16  # an unknown template's markers around one message (Llama 3's and Qwen's take ~5)
BOUND_TEMPLATE_TOKENS = 64  # and around the whole prompt: a default system line, the reply's opening


@dataclass(frozen=True)
class PromptTokens:
    """A prompt's tokens and how they were counted: `exact` (its provider's tokenizer) or a byte bound."""

    tokens: int
    exact: bool


@functools.cache
def _encoding(name: Encoding) -> Any:
    import bpe_openai  # lazy: loading an encoding takes ~1 s, and only a paid stage's check needs it

    return bpe_openai.get_encoding(name)


def text_tokens(text: str, encoding: Encoding | None) -> int:
    """The text's tokens in `encoding`, or its UTF-8 bytes (a bound on any tokenizer's count) without one."""
    if encoding is None:
        return len(text.encode("utf-8"))
    return len(_encoding(encoding).encode(text))


def prompt_tokens(messages: Sequence[dict[str, str]], model_name: str) -> PromptTokens:
    """The tokens `model_name`'s server reads for `messages`: exact for a known OpenAI tokenizer, else a bound."""
    known = known_model(model_name)
    encoding = known.encoding if known is not None else None
    content = sum(text_tokens(message["content"], encoding) for message in messages)
    if encoding is None:
        return PromptTokens(content + BOUND_PER_MESSAGE_TOKENS * len(messages) + BOUND_TEMPLATE_TOKENS, exact=False)
    assert known is not None
    return PromptTokens(content + PER_MESSAGE_TOKENS * len(messages) + known.template_tokens, exact=True)
