"""The grading report: one run's lines as the grading scorer prints them, the flat metrics of every run, the
table users keep (dataset x metric rows, one column per run), and the word counts of correct and incorrect
predictions per run."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tracevote.core.errors import DataError
from tracevote.core.fileio import write_text
from tracevote.report.plots import save_png, titled
from tracevote.report.tables import SIMULATED_BANNER

# (metric key in metrics/grading.json, the run record's field, the table's row label)
METRICS = (("accuracy", "accuracy", "accuracy"), ("avg_word_count", "avg_word_count", "average word count"),
           ("critic", "critic_score", "LLM critic (1-5)"),
           ("avg_word_count_correct", "avg_word_count_correct", "words, correct predictions"),
           ("avg_word_count_incorrect", "avg_word_count_incorrect", "words, incorrect predictions"))
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


def grading_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Flat metrics for `dvc metrics diff`: ``<run>.<dataset>.accuracy`` and the rest of METRICS."""
    metrics: dict[str, Any] = {"simulated": any(record["simulated"] for record in records)}
    for record in records:
        for key, field, _ in METRICS:
            metrics[f"{record['run']}.{record['dataset']}.{key}"] = _rounded(record[field])
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
            row.update({record["run"]: record[field] if record["dataset"] == dataset else None for record in records})
            rows.append(row)
    return rows


def render_table(records: Sequence[dict[str, Any]]) -> str:
    runs = [record["run"] for record in records]
    simulated = [record["run"] for record in records if record["simulated"]]
    lines = [f"**{SIMULATED_BANNER}** (runs {', '.join(simulated)})", ""] if simulated else []
    lines += ["Grading: Math-Verify accuracy (gold first), average word count of the reasoning, LLM critic.",
              "", "| dataset | metric | " + " | ".join(runs) + " |", "|---|---|" + "---:|" * len(runs)]
    for row in table_rows(records):
        cells = [_cell(row["metric"], row[run]) for run in runs]
        lines.append(f"| {row['dataset']} | {row['metric']} | " + " | ".join(cells) + " |")
    lines += ["", "Each run: " + "; ".join(f"{r['run']} = {r['predictions_path']} ({r['source']}, "
                                           f"{r['correct']}/{r['total']} correct)" for r in records) + "."]
    return "\n".join(lines) + "\n"


def _cell(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.2f}%" if metric == "accuracy" else f"{value:.2f}"


def write_table_csv(path: Path, records: Sequence[dict[str, Any]]) -> None:
    rows = table_rows(records)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["dataset", "metric", *(record["run"] for record in records)],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows([{key: "" if value is None else value for key, value in row.items()} for row in rows])
    write_text(path, out.getvalue())


def plot_word_counts(records: Sequence[dict[str, Any]], path: Path) -> None:
    """Per run: the average word count of all, correct and incorrect predictions, bars labelled."""
    if not records:
        raise DataError("no grading runs to plot")
    simulated = any(record["simulated"] for record in records)
    figure = Figure(figsize=(max(6.0, 1.9 * len(records) + 2), 4.5))
    axis = figure.subplots()
    bars = (("avg_word_count", "all", "tab:gray"), ("avg_word_count_correct", "correct", "tab:green"),
            ("avg_word_count_incorrect", "incorrect", "tab:red"))
    positions = np.arange(len(records))
    width = 0.26
    for offset, (field, label, colour) in enumerate(bars):
        values = [record[field] for record in records]
        heights = [0.0 if value is None else value for value in values]
        drawn = axis.bar(positions + (offset - 1) * width, heights, width, label=label, color=colour)
        axis.bar_label(drawn, labels=["-" if value is None else f"{value:.0f}" for value in values], fontsize=8)
    axis.set_xticks(positions, [f"{r['run']}\n{r['dataset']}\nacc {100 * r['accuracy']:.1f}%" for r in records],
                    fontsize=8)
    axis.set_ylabel("average words of reasoning")
    axis.legend(fontsize=8)
    axis.set_title(titled("Reasoning length: correct vs incorrect predictions", simulated), fontsize=10)
    figure.tight_layout()
    save_png(figure, path)
