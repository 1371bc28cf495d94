"""One graded run as the grading scorer printed it and as `grade --json` gives it. Light on imports: the grade
stage and the CLI print with it.

The scorer's lines, exactly as the write-up shows them (its wording, spacing and number formats):

    Loaded 1319 gold samples!
    Accuracy: 0.7324  (967/1319)
    Average word count: 205.37
    LLM critic disabled.            <- critic off; critic on instead:
    Evaluating 1/50
    ...
    Evaluating 50/50
    LLM Critic avg score: 4.18

then our own lines only where there is more to say: how many critic replies gave no score, and notes on what
needs a look (gold items without a prediction, unmatched ids, ...). A simulated run starts with a banner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracevote.core.simulated import SIMULATED_BANNER

JSON_KEYS = ("accuracy", "correct", "total", "missing", "string_fallbacks", "unjudged", "avg_word_count",
             "avg_word_count_correct", "avg_word_count_incorrect", "predictions", "unmatched",
             "critic_score", "critic_scored", "critic_unparsable", "simulated")
UNPARSABLE_NOTE = "no score; left out of the average"
NOTHING_TO_SCORE = "n/a (nothing to score: no gold item with a reference solution has a prediction)"


def render_run(record: dict[str, Any], *, critic_enabled: bool | None = None, notes: Sequence[str] = ()) -> str:
    """The scorer's lines (see the module docstring), then `notes` (the caller's: `grade --limit`'s) and ours.
    `critic_enabled` None: the critic counts as enabled when it asked about anything."""
    asked = record["critic_scored"] + record["critic_unparsable"]
    enabled = asked > 0 if critic_enabled is None else critic_enabled
    lines = [f"*** {SIMULATED_BANNER} ***"] if record.get("simulated") else []
    lines += [f"Loaded {record['gold_items']} gold samples!",
              f"Accuracy: {record['accuracy']:.4f}  ({record['correct']}/{record['total']})",
              f"Average word count: {record['avg_word_count']:.2f}"]
    lines += critic_lines(record["critic_score"], record["critic_scored"], record["critic_unparsable"]) \
        if enabled else ["LLM critic disabled."]
    return "\n".join([*lines, *notes, *_notes(record)])


def critic_lines(mean: float | None, scored: int, unparsable: int) -> list[str]:
    """The enabled critic's lines: one ``Evaluating i/n`` per item asked about, in gold order, the mean, and the
    replies that gave no score, when there are any (left out of the mean, never counted as a low score).

    >>> critic_lines(4.0, 2, 0)
    ['Evaluating 1/2', 'Evaluating 2/2', 'LLM Critic avg score: 4.00']
    >>> critic_lines(4.0, 1, 1)[-1]
    'LLM Critic unparsable replies: 1/2 (no score; left out of the average)'
    """
    asked = scored + unparsable
    if not asked:
        return [f"LLM Critic avg score: {NOTHING_TO_SCORE}"]
    lines = [f"Evaluating {index}/{asked}" for index in range(1, asked + 1)]
    lines.append("LLM Critic avg score: n/a" if mean is None else f"LLM Critic avg score: {mean:.2f}")
    if unparsable:
        lines.append(f"LLM Critic unparsable replies: {unparsable}/{asked} ({UNPARSABLE_NOTE})")
    return lines


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
