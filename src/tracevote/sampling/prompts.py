"""The prompts methods send, each marked with the kind of call it makes.

A prompt builder returns a Prompt: the chat messages and their kind. The client sends the kind in the
X-Tracevote-Kind header (real servers ignore it), so the simulated model answers each kind of call
plausibly without reading the text. The "solve" prompt, which every method starts from: the problem, then
the instruction to box the final answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracevote.datasets.problems import Problem
    from tracevote.store.pool import Setting

SOLVE = "solve"
DEFAULT_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class Prompt:
    kind: str  # the marker sent as X-Tracevote-Kind: "solve", ...
    messages: list[dict[str, str]]


def solve_prompt(problem: str, *, system: str | None, template: str = DEFAULT_TEMPLATE) -> Prompt:
    """A "solve" call for one problem: [{"role": "user", "content": "<problem>\\n\\nPlease reason ..."}],
    preceded by {"role": "system", ...} when a system prompt is set.
    """
    # Plain replacement, not str.format: templates are full of LaTeX braces such as \boxed{}.
    user = {"role": "user", "content": template.replace("{problem}", problem)}
    return Prompt(SOLVE, [{"role": "system", "content": system}, user] if system else [user])


def build_messages(problem: str, *, system: str | None, template: str = DEFAULT_TEMPLATE) -> list[dict[str, str]]:
    """The messages of `solve_prompt` (for callers that send only solve calls)."""
    return solve_prompt(problem, system=system, template=template).messages


def setting_messages(problems: Iterable[Problem], setting: Setting) -> dict[str, list[dict[str, str]]]:
    """The solve messages a pool's setting sends for each problem, by problem id: what the pool records a
    digest of (Pool.register) and what build_pool sends."""
    return {p.id: build_messages(p.problem, system=setting.system, template=setting.template) for p in problems}


def prompt_bytes(messages: list[dict[str, str]]) -> int:
    """UTF-8 size of every message's content, system prompt included: what cost estimates count."""
    return sum(len(message["content"].encode()) for message in messages)
