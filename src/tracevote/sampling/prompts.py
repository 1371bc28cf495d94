"""The one prompt every method uses: the problem, then the instruction to box the final answer."""

from __future__ import annotations

DEFAULT_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{}."


def build_messages(problem: str, *, system: str | None, template: str = DEFAULT_TEMPLATE) -> list[dict[str, str]]:
    """Chat messages for one problem: [{"role": "user", "content": "<problem>\\n\\nPlease reason ..."}],
    preceded by {"role": "system", ...} when a system prompt is set.
    """
    # Plain replacement, not str.format: templates are full of LaTeX braces such as \boxed{}.
    user = {"role": "user", "content": template.replace("{problem}", problem)}
    return [{"role": "system", "content": system}, user] if system else [user]
