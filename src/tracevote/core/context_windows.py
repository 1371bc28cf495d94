"""The context windows of the model names the project knows, and the tokenizer each one's prompts are counted with.

A window is what its provider documents: prompt tokens + the completion limit (max_tokens) must not exceed it,
OpenAI's and vLLM's rule. `endpoints.<key>.context_window` overrides it; a name not listed here and no setting
leaves the endpoint unchecked (said once, naming it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Encoding = Literal["cl100k_base", "o200k_base"]
CHECKED = "2026-12"  # when every figure below was last read from its source


@dataclass(frozen=True)
class KnownModel:
    """A model name's documented window, where the figure comes from, and the tokenizer its provider uses (None:
    none ships offline, prompts are bounded by their bytes: see core.prompt_tokens)."""

    name: str
    window: int
    source: str
    encoding: Encoding | None
    template_tokens: int = 16  # what the server adds around the messages: role markers, reply priming


_OPENAI = "OpenAI's model page (platform.openai.com/docs/models)"
KNOWN_MODELS: tuple[KnownModel, ...] = (
    KnownModel("gpt-4", 8_192, _OPENAI, "cl100k_base"),
    KnownModel("gpt-4-32k", 32_768, _OPENAI, "cl100k_base"),
    KnownModel("gpt-4-turbo", 128_000, _OPENAI, "cl100k_base"),
    KnownModel("gpt-3.5-turbo", 16_385, _OPENAI, "cl100k_base"),
    KnownModel("gpt-4o", 128_000, _OPENAI, "o200k_base"),
    KnownModel("gpt-4o-mini", 128_000, _OPENAI, "o200k_base"),
    KnownModel("gpt-4.1", 1_047_576, _OPENAI, "o200k_base"),
    KnownModel("gpt-4.1-mini", 1_047_576, _OPENAI, "o200k_base"),
    KnownModel("gpt-4.1-nano", 1_047_576, _OPENAI, "o200k_base"),
    KnownModel("gpt-5", 400_000, _OPENAI, "o200k_base"),
    KnownModel("gpt-5-mini", 400_000, _OPENAI, "o200k_base"),
    KnownModel("gpt-5-nano", 400_000, _OPENAI, "o200k_base"),
    KnownModel("o1", 200_000, _OPENAI, "o200k_base"),
    KnownModel("o1-mini", 128_000, _OPENAI, "o200k_base"),
    KnownModel("o3", 200_000, _OPENAI, "o200k_base"),
    KnownModel("o3-mini", 200_000, _OPENAI, "o200k_base"),
    KnownModel("o4-mini", 200_000, _OPENAI, "o200k_base"),
    # gpt-oss's harmony format is o200k_base plus special tokens; the server adds a system message of its own
    # (identity, date, reasoning effort, channels), ~50 tokens
    KnownModel("gpt-oss-20b", 131_072, "the model card (huggingface.co/openai/gpt-oss-20b, config.json)",
               "o200k_base", template_tokens=96),
    KnownModel("gpt-oss-120b", 131_072, "the model card (huggingface.co/openai/gpt-oss-120b, config.json)",
               "o200k_base", template_tokens=96),
    KnownModel("deepseek-v4-flash", 1_048_576, "DeepSeek's models & pricing page (api-docs.deepseek.com: 1M)", None),
    KnownModel("deepseek-chat", 131_072, "DeepSeek's models & pricing page (api-docs.deepseek.com: 128K)", None),
    KnownModel("deepseek-reasoner", 131_072, "DeepSeek's models & pricing page (api-docs.deepseek.com: 128K)",
               None),
)
_BY_NAME = {model.name: model for model in KNOWN_MODELS}


def known_model(name: str) -> KnownModel | None:
    """The entry a served model name falls under: its last path part, a dated snapshot under its base name.

    >>> known_model("gpt-4-0613").window, known_model("openai/gpt-oss-120b").window
    (8192, 131072)
    >>> known_model("gpt-4o-mini-2024-07-18").name, known_model("my-finetune") is None
    ('gpt-4o-mini', True)
    """
    base = name.rsplit("/", 1)[-1].lower()
    while base:
        if base in _BY_NAME:
            return _BY_NAME[base]
        head, _, tail = base.rpartition("-")
        if not head or not tail[:1].isdigit():  # only a dated or numbered suffix is dropped: gpt-4o is not gpt-4
            return None
        base = head
    return None


@dataclass(frozen=True)
class ContextWindow:
    """An endpoint's window and why it has it ("as set", "gpt-4's documented window")."""

    tokens: int
    why: str


def context_window(name: str, setting: int | None) -> ContextWindow | None:
    """The window of a model `name` with `endpoints.<key>.context_window` = `setting`; None: unknown, unchecked."""
    if setting is not None:
        return ContextWindow(setting, "as set in context_window")
    known = known_model(name)
    if known is None:
        return None
    return ContextWindow(known.window, f"{known.name}'s documented window, {known.source}, checked {CHECKED}")
