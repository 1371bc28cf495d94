"""The grading report: the flat metrics of every run, the table users keep (dataset x metric rows, one column
per run), and the word counts of correct and incorrect predictions per run."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tracevote.core.csvtext import csv_text
from tracevote.core.fileio import write_text
from tracevote.core.mdtext import md_text
from tracevote.report.figures import save_png, titled
from tracevote.report.tables import SIMULATED_BANNER

# (metric key in metrics/grading.json, the run record's field, the table's row label)
METRICS = (("accuracy_pct", "accuracy", "accuracy (%)"), ("avg_word_count", "avg_word_count", "average word count"),
           ("critic", "critic_score", "LLM critic (1-5)"),
           ("avg_word_count_correct", "avg_word_count_correct", "words, correct predictions"),
           ("avg_word_count_incorrect", "avg_word_count_incorrect", "words, incorrect predictions"))
# counts beside them: the critic's replies with a score and without one (left out of its mean, never a low score)
COUNTS = ("critic_scored", "critic_unparsable")
PERCENT_FIELDS = frozenset({"accuracy"})  # a share in the run record, shown in percent like every accuracy


def _shown(record: dict[str, Any], field: str) -> float | None:
    """The record's field as the table and metrics give it: accuracy 0.65625 -> 65.625."""
    value = record[field]
    return 100 * value if field in PERCENT_FIELDS and value is not None else value


def grading_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every run's figures, flat: ``<run>.<dataset>.accuracy_pct``, the rest of METRICS, and COUNTS (the short
    headline `dvc metrics show` reads is report.headline's)."""
    metrics: dict[str, Any] = {"simulated": any(record["simulated"] for record in records)}
    for record in records:
        prefix = f"{record['run']}.{record['dataset']}"
        for key, field, _ in METRICS:
            metrics[f"{prefix}.{key}"] = _rounded(_shown(record, field))
        metrics.update({f"{prefix}.{key}": record[key] for key in COUNTS})
    return metrics


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def table_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (dataset, metric), one column per run (None where the run is on another dataset)."""
    datasets = list(dict.fromkeys(record["dataset"] for record in records))
    rows = []
    for dataset in datasets:
        for _, field, label in METRICS:
            row: dict[str, Any] = {"dataset": dataset, "metric": label}
            row.update({record["run"]: _shown(record, field) if record["dataset"] == dataset else None
                        for record in records})
            rows.append(row)
    return rows


def render_table(records: Sequence[dict[str, Any]]) -> str:
    runs = [record["run"] for record in records]
    simulated = [record["run"] for record in records if record["simulated"]]
    lines = [f"**{SIMULATED_BANNER}** (runs {', '.join(map(md_text, simulated))})", ""] if simulated else []
    lines += ["Grading: Math-Verify accuracy (gold first), average word count of the reasoning, LLM critic.",
              "", "| dataset | metric | " + " | ".join(map(md_text, runs)) + " |", "|---|---|" + "---:|" * len(runs)]
    for row in table_rows(records):
        cells = [_cell(row[run]) for run in runs]
        lines.append(f"| {md_text(row['dataset'])} | {row['metric']} | " + " | ".join(cells) + " |")
    lines += ["", "Each run: " + "; ".join(f"{md_text(r['run'])} = {md_text(r['predictions_path'])} ({r['source']}, "
                                           f"{r['correct']}/{r['total']} correct{_unparsable(r)})"
                                           for r in records) + "."]
    return "\n".join(lines) + "\n"


def _unparsable(record: dict[str, Any]) -> str:
    """", critic: 3 of 50 replies gave no score" when some did (the mean leaves them out)."""
    unparsable = record["critic_unparsable"]
    asked = record["critic_scored"] + unparsable
    return f", critic: {unparsable} of {asked} replies gave no score" if unparsable else ""


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def write_table_csv(path: Path, records: Sequence[dict[str, Any]]) -> None:
    header = ["dataset", "metric", *(record["run"] for record in records)]
    write_text(path, csv_text(header, ([row[key] for key in header] for row in table_rows(records))))


def plot_word_counts(records: Sequence[dict[str, Any]], path: Path) -> None:
    """One panel per run, each on its own scale (a pool's traces run to thousands of words, a distilled model's
    answers to a few hundred): the average word count of all, correct and incorrect predictions, labelled."""
    simulated = any(record["simulated"] for record in records)
    columns = min(len(records), 4)
    rows = -(-len(records) // columns)
    width = 3.2 * columns + 0.6
    figure = Figure(figsize=(width, 3.4 * rows + 0.6))
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False)).ravel()
    for axis, record in zip(axes, records, strict=False):
        _word_count_panel(axis, record)
    for axis in axes[len(records):]:
        axis.set_visible(False)
    axes[0].set_ylabel("average words of reasoning")
    # wrapped to the figure's width (about 11 characters an inch at this size): one run's panel is narrow
    title = titled("Reasoning length of correct and incorrect predictions", simulated)
    figure.suptitle("\n".join(textwrap.wrap(title, width=int(11 * width))), fontsize=11)
    figure.tight_layout()
    save_png(figure, path)


_WORD_BARS = (("avg_word_count", "all", "tab:gray"), ("avg_word_count_correct", "correct", "tab:green"),
              ("avg_word_count_incorrect", "incorrect", "tab:red"))


def _word_count_panel(axis: Any, record: dict[str, Any]) -> None:
    values = [record[field] for field, _, _ in _WORD_BARS]
    drawn = axis.bar([label for _, label, _ in _WORD_BARS], [0.0 if v is None else v for v in values],
                     color=[colour for _, _, colour in _WORD_BARS])
    axis.bar_label(drawn, labels=["none" if v is None else f"{v:.0f}" for v in values], fontsize=8)
    axis.margins(y=0.15)
    axis.set_title(f"{record['run']} ({record['dataset']})\naccuracy {100 * record['accuracy']:.2f}%, "
                   f"{record['correct']}/{record['total']}", fontsize=9)
    axis.tick_params(labelsize=8)
