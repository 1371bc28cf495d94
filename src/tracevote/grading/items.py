"""`grade --limit N` and `grade --per-item FILE`: grading only a file's first predictions, and one row per item.

- Limit: the first N predictions of the file (in file order) and the gold items they name, so accuracy is over
  those items only, as lm-eval-harness's and Inspect's `--limit` grade the first N samples.
- Per-item rows, in gold order: each prediction's id, gold, extracted answer, verdict, the reasoning's length and
  the critic's score (and whether the simulated model gave it); a gold item without a prediction is a row too
  (it counts as wrong). Written as JSON lines or CSV by the file's extension, atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, astuple, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tracevote.core.csvtext import csv_text
from tracevote.core.errors import ConfigError
from tracevote.core.fileio import write_jsonl, write_text
from tracevote.grading.accuracy import Grades, Pairing
from tracevote.grading.gold import GoldItem
from tracevote.grading.predictions import Prediction

if TYPE_CHECKING:  # the critic's module loads pyarrow and numpy: imported only when it runs
    from tracevote.grading.critic import CriticScores

RowFormat = Literal["jsonl", "csv"]
ROW_FORMATS: dict[str, RowFormat] = {".jsonl": "jsonl", ".csv": "csv"}


@dataclass(frozen=True)
class Limited:
    """What `--limit` left out: it graded `kept_predictions` of `predictions` and `kept_gold` of `gold_items`."""

    limit: int
    predictions: int
    kept_predictions: int
    gold_items: int
    kept_gold: int

    def note(self) -> str:
        """The summary's line saying so.

        >>> Limited(3, 7, 3, 8, 3).note()
        'note: --limit 3: graded the first 3 of 7 predictions, against their 3 gold items (of 8)'
        """
        return (f"note: --limit {self.limit}: graded the first {self.kept_predictions} of {self.predictions} "
                f"predictions, against their {self.kept_gold} gold items (of {self.gold_items})")


def first_items(gold: Sequence[GoldItem], predictions: Sequence[Prediction],
                limit: int) -> tuple[list[GoldItem], list[Prediction], Limited]:
    """The first `limit` predictions, in file order, and the gold items they name (in gold order).

    >>> gold = [GoldItem(f"g{i}", "?", str(i), None) for i in range(4)]
    >>> kept_gold, kept, _ = first_items(gold, [Prediction(f"g{i}", None, "", "", i) for i in (2, 0, 3)], 2)
    >>> [item.id for item in kept_gold], [p.id for p in kept]
    (['g0', 'g2'], ['g2', 'g0'])
    """
    kept = list(predictions[:limit])
    ids = {prediction.id for prediction in kept}
    kept_gold = [item for item in gold if item.id in ids]
    return kept_gold, kept, Limited(limit, len(predictions), len(kept), len(gold), len(kept_gold))


@dataclass(frozen=True)
class ItemRow:
    """One graded prediction, or a gold item without one (method "missing", counted wrong)."""

    id: str
    line: int | None  # the prediction's line in its file
    gold: str
    answer: str | None  # the final answer read from `content`
    correct: bool
    method: str  # math_verify | string (Math-Verify raised) | unjudged (it overran its time limit) | missing
    reasoning_words: int | None  # len(thinking.split()), the scorer's word count
    reasoning_chars: int | None
    critic_score: float | None
    critic: str  # scored | unparsable (its reply gave no score) | not asked (past max_samples) | off
    critic_simulated: bool  # the score came from the simulated model: it tests the pipeline, not a real critic


def item_rows(gold: Sequence[GoldItem], pairing: Pairing, grades: Grades,
              critic: CriticScores | None, *, critic_simulated: bool = False) -> list[ItemRow]:
    """Every item's row in gold order; `pairing` is the one `grades` was graded from (same order)."""
    rows: dict[str, list[ItemRow]] = {}
    for (_, prediction), graded in zip(pairing.pairs, grades.graded, strict=True):
        first = graded.id not in rows  # the critic asks about a gold item's first prediction only
        score, verdict = _critic_verdict(critic, graded.id if first else None)
        rows.setdefault(graded.id, []).append(ItemRow(
            graded.id, graded.line, graded.gold, graded.answer, graded.correct, graded.method, graded.words,
            len(prediction.thinking), score, verdict, critic_simulated))
    for item in gold:
        if item.id not in rows:
            rows[item.id] = [ItemRow(item.id, None, item.answer, None, False, "missing", None, None, None,
                                     "off" if critic is None else "not asked", critic_simulated)]
    return [row for item in gold for row in rows[item.id]]


def _critic_verdict(critic: CriticScores | None, gold_id: str | None) -> tuple[float | None, str]:
    if critic is None:
        return None, "off"
    if gold_id is None or gold_id not in critic.scores:
        return None, "not asked"
    score = critic.scores[gold_id]
    return score, "unparsable" if score is None else "scored"


def row_format(path: Path) -> RowFormat:
    """The per-item file's format by its extension (checked before anything is graded)."""
    suffix = path.suffix.lower()
    if suffix not in ROW_FORMATS:
        raise ConfigError(f"--per-item {path}: unknown extension {suffix or '(none)'!r}; name a .jsonl file "
                          f"(JSON lines) or a .csv file")
    if path.is_dir():
        raise ConfigError(f"--per-item {path}: is a folder; name a .jsonl or .csv file")
    return ROW_FORMATS[suffix]


def write_item_rows(path: Path, rows: Sequence[ItemRow]) -> None:
    """`rows` as JSON lines (ids and answers exactly as read) or CSV (a header, then one line per row; None as an
    empty cell; a formula-like text cell behind a leading quote, core.csvtext), whole or not at all."""
    if row_format(path) == "jsonl":
        write_jsonl(path, (asdict(row) for row in rows))
        return
    write_text(path, csv_text([field.name for field in fields(ItemRow)], (astuple(row) for row in rows)))
