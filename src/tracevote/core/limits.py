"""Bounds and rules of params.yaml values that check_params applies and the code that uses them shares: size
bounds, the request fields the client sets itself, environment variable names and critique template placeholders.

    check_extra_body("model", {"temperature": 0.1})
    -> ConfigError("model.extra_body: 'temperature' is set by the client; set it under decoding ... instead")
"""

from __future__ import annotations

import re
import string
from typing import Any

from tracevote.core.typedconfig import report, require

# Upper bounds on sizes, so a typo (an extra three zeros) is refused here, not by an allocation or a server.
MAX_TOKENS_BOUND = 1_000_000  # any max_tokens and any per-trace token window
MAX_COUNT_BOUND = 1_000_000  # per-problem samples, votes, resamples, repeats
# The request fields the client sets itself; model.extra_body may not override them.
CLIENT_SET_FIELDS = frozenset({"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "logprobs",
                               "top_logprobs", "top_p", "stream", "stream_options", "n", "reasoning_effort"})
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CRITIQUE_FIELDS = ("problem", "tagged_response")  # what tracevote.critique.prompts fills a critique template with


def require_count(where: str, key: str, value: int) -> None:
    require(1 <= value <= MAX_COUNT_BOUND, where, key, value, f"an integer in 1..{MAX_COUNT_BOUND:,}")


def check_extra_body(where: str, extra_body: dict[str, Any]) -> None:
    """A field the client sets itself would be overridden silently: refuse it, naming where it belongs."""
    clashes = sorted(CLIENT_SET_FIELDS & set(extra_body))
    if clashes == ["reasoning_effort"]:
        report(f"{where}.extra_body", f"'reasoning_effort' is set by the client; set {where}.reasoning_effort instead")
    elif clashes:
        report(f"{where}.extra_body", f"{clashes[0]!r} is set by the client; set it under decoding (or the "
                                      f"section's own temperature / max_tokens) instead")


def require_env_name(where: str, name: str) -> None:
    require(bool(ENV_NAME.match(name)), where, "api_key_env", name,
            "an environment variable name (letters, digits and _, not starting with a digit)")


def template_fields(template: str) -> list[str]:
    """The placeholders str.format would fill, in order ("" for a positional {}); a brace error raises ValueError.

    >>> template_fields("{problem} and {tagged_response}, {{literal}}")
    ['problem', 'tagged_response']
    """
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def require_critique_template(where: str, template: str) -> None:
    """Exactly the placeholders the critique fills: both present, no other (a typo would be a KeyError later)."""
    try:
        fields = template_fields(template.strip())
    except ValueError as exc:
        report(f"{where}.template", f"does not fill with str.format ({exc}); write a literal brace as {{{{ or }}}}")
        return
    unknown = [name for name in fields if name not in CRITIQUE_FIELDS]  # {problem.x} and {problem[0]} too
    if unknown:
        report(f"{where}.template", f"unknown placeholder {{{unknown[0]}}} (known: "
                                    f"{', '.join('{' + name + '}' for name in CRITIQUE_FIELDS)}; write a literal "
                                    f"brace as {{{{ or }}}})")
        return
    missing = [name for name in CRITIQUE_FIELDS if name not in fields]
    if missing:
        report(f"{where}.template", f"lacks the placeholder {{{missing[0]}}} (a critique template holds "
                                    f"{' and '.join('{' + name + '}' for name in CRITIQUE_FIELDS)})")
        return
    try:  # a format spec that text cannot take, {problem:d}
        template.format(**dict.fromkeys(CRITIQUE_FIELDS, ""))
    except ValueError as exc:
        report(f"{where}.template", f"does not fill with str.format ({exc})")
