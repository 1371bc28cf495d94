"""One graded run as the grading scorer printed it (``Accuracy: 0.7324 (967/1319)``, ...) and as `grade --json`
gives it. Light on imports: the grade stage and the CLI print with it."""

from __future__ import annotations

from typing import Any

from tracevote.report.tables import SIMULATED_BANNER

JSON_KEYS = ("accuracy", "correct", "total", "missing", "string_fallbacks", "unjudged", "avg_word_count",
             "avg_word_count_correct", "avg_word_count_incorrect", "predictions", "unmatched",
             "critic_score", "critic_scored", "critic_unparsable", "simulated")


def render_run(record: dict[str, Any], *, critic_enabled: bool | None = None) -> str:
    """The scorer's three lines (``Accuracy: 0.7324 (967/1319)``, ``Average word count: 205.37``,
    ``LLM critic: 4.18 (50 scored)`` or ``LLM critic disabled.``), then notes on what needs a look."""
    enabled = record["critic_scored"] + record["critic_unparsable"] > 0 if critic_enabled is None else critic_enabled
    lines = [f"*** {SIMULATED_BANNER} ***"] if record.get("simulated") else []
    lines += [f"Accuracy: {record['accuracy']:.4f} ({record['correct']}/{record['total']})",
              f"Average word count: {record['avg_word_count']:.2f}"]
    if not enabled:
        lines.append("LLM critic disabled.")
    elif record["critic_score"] is None and not record["critic_unparsable"]:
        lines.append("LLM critic: nothing to score (no gold item with a reference solution has a prediction)")
    elif record["critic_score"] is None:
        lines.append(f"LLM critic: none scored ({record['critic_unparsable']} unparsable)")
    else:
        unparsable = f", {record['critic_unparsable']} unparsable" if record["critic_unparsable"] else ""
        lines.append(f"LLM critic: {record['critic_score']:.2f} ({record['critic_scored']} scored{unparsable})")
    return "\n".join(lines + _notes(record))


def _notes(record: dict[str, Any]) -> list[str]:
    notes = []
    if record["missing"]:
        notes.append(f"note: {record['missing']} gold items have no prediction (counted wrong)")
    if record["unmatched"]:
        notes.append(f"note: {record['unmatched']} predictions have an id no gold item has (first: "
                     f"{record['first_unmatched']!r}); check the id convention (--id-key)")
    if record["string_fallbacks"]:
        notes.append(f"note: Math-Verify raised on {record['string_fallbacks']} comparisons, compared as strings")
    if record["unjudged"]:
        notes.append(f"note: {record['unjudged']} comparisons overran the time limit (counted wrong)")
    return notes


def json_summary(record: dict[str, Any]) -> dict[str, Any]:
    """`grade --json`'s object: the scorer's fields first, then what else the run measured."""
    return {key: record[key] for key in JSON_KEYS}
