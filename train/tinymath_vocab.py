"""The tinymath model's tokenizer: a llama.cpp "llama" (SentencePiece-style) vocabulary built from the
generator's words, and an encoder that reproduces llama.cpp's SPM merge algorithm exactly.

Tokens: control tokens (<s>, the chat roles, <|end|>), 256 byte tokens (byte fallback, e.g. the newline),
single printable characters, the prompt's instruction as one token, and every word of the generator's
templates and the prompt with and without a leading "▁" (SentencePiece's space), each with all its prefixes
so that pairwise merges can reach it. Digits stay single characters, so the model does arithmetic digit by
digit. A token's score is its length: llama.cpp merges the highest-scoring adjacent pair first, ties going to
the leftmost.
"""

from __future__ import annotations

import functools
import heapq
import re
from dataclasses import dataclass

from tracevote.datasets.tinymath import ITEMS, NAMES

SPACE = "\u2581"
UNK, BOS, USER, ASSISTANT, END = "<unk>", "<s>", "<|user|>", "<|assistant|>", "<|end|>"
CONTROL = (BOS, USER, ASSISTANT, END)
# gguf's token types (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL_TYPE, BYTE = 1, 2, 3, 6

TEMPLATE_WORDS = (
    "has", "buys", "finds", "more", "gives", "to", "loses", "sells", "doubles", "the", "also", "How", "many", "does",
    "have", "now", "starts", "with", "Please", "reason", "step", "by", "step,", "and", "put", "your", "final",
    "answer", "within", "\\boxed{", "boxed",
)
# the project's instruction (params.yaml prompt.template) is one token: every prompt carries it, so one token
# instead of fifteen makes training several times cheaper per problem
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}<|user|>{{ message['content'] }}<|end|>"
    "{% elif message['role'] == 'assistant' %}<|assistant|>{{ message['content'] }}<|end|>{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@dataclass(frozen=True, eq=False)  # eq=False: hashed by identity, so caches keyed on it stay cheap
class Vocab:
    tokens: tuple[str, ...]
    scores: tuple[float, ...]
    types: tuple[int, ...]

    @functools.cached_property
    def ids(self) -> dict[str, int]:
        return {token: index for index, token in enumerate(self.tokens)}


def byte_token(value: int) -> str:
    return f"<0x{value:02X}>"


def _prefixes(word: str) -> list[str]:
    return [word[:end] for end in range(2, len(word) + 1)]


def build_vocab() -> Vocab:
    tokens: list[str] = [UNK, *CONTROL]
    types = [UNKNOWN] + [CONTROL_TYPE] * len(CONTROL)
    tokens += [byte_token(value) for value in range(256)]
    types += [BYTE] * 256
    singles = [SPACE] + [chr(code) for code in range(0x21, 0x7F)]
    words: list[str] = []
    for word in (*TEMPLATE_WORDS, *NAMES, *ITEMS, "+", "-", "*", "=", INSTRUCTION.replace(" ", SPACE)):
        for form in (word, SPACE + word):
            words += [prefix for prefix in _prefixes(form) if prefix not in words and prefix not in singles]
    tokens += singles + words
    types += [NORMAL] * (len(singles) + len(words))
    scores = [0.0] * (len(tokens) - len(words)) + [float(len(word)) for word in words]
    return Vocab(tuple(tokens), tuple(scores), tuple(types))


def _merge(text: str, ids: dict[str, int], scores: tuple[float, ...]) -> list[str]:
    """llama.cpp's llm_tokenizer_spm_session: merge the best-scoring adjacent pair until none is a token."""
    pieces: list[str | None] = list(text)
    following = [*range(1, len(pieces)), -1]
    previous = list(range(-1, len(pieces) - 1))
    queue: list[tuple[float, int, int, str]] = []

    def push(left: int, right: int) -> None:
        if left < 0 or right < 0:
            return
        merged = pieces[left] + pieces[right]  # type: ignore[operator]
        if merged in ids:
            heapq.heappush(queue, (-scores[ids[merged]], left, right, merged))

    for index in range(1, len(pieces)):
        push(index - 1, index)
    while queue:
        _, left, right, merged = heapq.heappop(queue)
        if pieces[left] is None or pieces[right] is None or pieces[left] + pieces[right] != merged:  # type: ignore[operator]
            continue  # subtle: one side was merged since this pair was queued
        pieces[left], pieces[right] = merged, None
        following[left] = following[right]
        if following[right] >= 0:
            previous[following[right]] = left
        push(previous[left], left)
        push(left, following[left])
    return [piece for piece in pieces if piece is not None]


def encode_words(text: str, vocab: Vocab) -> list[int]:
    """encode() of text that holds no control token, no newline and not the instruction, chunk by chunk.

    The same ids as encode(), much faster on the generator's problems: no other token holds a "▁" after its
    start, so no merge crosses the start of a word, and each word is merged once and remembered.
    """
    ids: list[int] = []
    for index, word in enumerate(text.split(" ")):
        ids += _encode_chunk(word if index == 0 else SPACE + word, vocab)
    return ids


@functools.lru_cache(maxsize=100_000)
def _encode_chunk(chunk: str, vocab: Vocab) -> tuple[int, ...]:
    return tuple(encode(chunk.replace(SPACE, " "), vocab))


def encode(text: str, vocab: Vocab) -> list[int]:
    """Token ids of `text` as llama.cpp tokenizes it (special tokens parsed, no space prefix, no BOS)."""
    ids = vocab.ids
    out: list[int] = []
    for fragment in re.split("(" + "|".join(re.escape(token) for token in CONTROL) + ")", text):
        if fragment in CONTROL:
            out.append(ids[fragment])
            continue
        for piece in _merge(fragment.replace(" ", SPACE), ids, vocab.scores):
            if piece in ids:
                out.append(ids[piece])
            else:
                out += [ids[byte_token(value)] for value in piece.encode("utf-8")]
    return out


def decode(token_ids: list[int], vocab: Vocab) -> str:
    """The text of `token_ids`, control tokens dropped, as llama.cpp's detokenizer renders it."""
    raw = bytearray()
    for token_id in token_ids:
        token, kind = vocab.tokens[token_id], vocab.types[token_id]
        if kind == BYTE:
            raw.append(int(token[3:5], 16))
        elif kind == NORMAL:
            raw += token.replace(SPACE, " ").encode("utf-8")
    return raw.decode("utf-8", errors="replace")


def user_message(problem: str) -> str:
    """The user message tracevote sends (params.yaml prompt.template, no system message)."""
    return f"{problem}\n\n{INSTRUCTION}"


def chat_prompt(user: str) -> str:
    """The text llama-cpp-python renders from CHAT_TEMPLATE for one user message (generation prompt on)."""
    return f"{BOS}{USER}{user}{END}{ASSISTANT}"
