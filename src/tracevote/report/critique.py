"""The critique report: the scores per dataset and task as a table, and one figure: error accuracy, correct
accuracy and F1 per dataset and task beside where the vote put the first error against where it was."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from tracevote.core.csvtext import read_cell
from tracevote.core.errors import DataError
from tracevote.core.mdtext import md_text
from tracevote.core.simulated import SIMULATED_BANNER
from tracevote.critique.results import BY_TASK_COLUMNS, PERCENT_KEYS
from tracevote.report.figures import save_png, titled

POSITION_CAP = 10  # first-error steps from this one on share the last row and column of the heat map
_BARS = (("error_accuracy_pct", "error accuracy", "tab:red"), ("correct_accuracy_pct", "correct accuracy", "tab:green"),
         ("f1_pct", "F1", "tab:blue"))


def read_by_task_csv(path: Path) -> list[dict[str, Any]]:
    """score_critiques' rows back, typed: dataset and task as text, the counts as int, each share a float or None
    (an empty subset's, written as an empty cell)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            header, *lines = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:  # ValueError: no header
        raise DataError(f"{path}: cannot read the critique scores by task ({exc})") from exc
    missing = [column for column in BY_TASK_COLUMNS if column not in header]
    if missing:
        raise DataError(f"{path}: column {missing[0]!r} is missing (run score_critiques)")
    return [_by_task_row(path, number, dict(zip(header, line, strict=False)))
            for number, line in enumerate(lines, start=2) if line]  # a blank line is no row, as to pandas


def _by_task_row(path: Path, number: int, cells: dict[str, str]) -> dict[str, Any]:
    try:  # as score_critiques read them, before core.csvtext made them safe
        return {**cells, "dataset": read_cell(cells["dataset"]), "task": read_cell(cells["task"]),
                "n_error": int(cells["n_error"]), "n_correct": int(cells["n_correct"]),
                **{key: float(cells[key]) if cells[key] else None for key in PERCENT_KEYS.values()}}
    except (KeyError, ValueError) as exc:
        raise DataError(f"{path}: row {number}: not a count or a share ({exc})") from exc


def subset_label(row: dict[str, Any]) -> str:
    """"processbench_gsm8k", or "deltabench/math" for a dataset holding several tasks."""
    return row["dataset"] if row["task"] == row["dataset"] else f"{row['dataset']}/{row['task']}"


def render_markdown(rows: Sequence[dict[str, Any]], metrics: dict[str, Any], *, simulated: bool,
                    models: Sequence[str] = ()) -> str:
    """The critique table; `models`, the critics' models, name who wrote the critiques."""
    lines = [f"**{SIMULATED_BANNER}**", ""] if simulated else []
    by = f" by {', '.join(map(md_text, models))}" if models else ""
    lines += [f"First-error identification{by} (ProcessBench's prompt and scores), {metrics['solutions']} solutions, "
              f"majority vote over each solution's critiques. Percentages (%); an empty subset is shown as -.", "",
              "| dataset | task | with error | without | error acc | correct acc | F1 | unanimous | unparsable |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {md_text(r['dataset'])} | {md_text(r['task'])} | {r['n_error']} | {r['n_correct']} | {_shares(r)} |"
              for r in rows]
    lines += [f"| **all** | | {metrics['n_error']} | {metrics['n_correct']} | {_shares(metrics)} |", ""]
    lines.append(f"Mean F1 over datasets: {_percent(metrics['f1_mean_pct'])}. {metrics['calls']} critiques, "
                 f"{metrics['completion_tokens_per_call']} completion tokens each on average, "
                 f"{metrics['truncated']} cut off at max_tokens.")
    return "\n".join(lines) + "\n"


def _shares(scores: dict[str, Any]) -> str:
    """The error accuracy, correct accuracy, F1, unanimous and unparsable shares as table cells."""
    return " | ".join(_percent(scores[key]) for key in PERCENT_KEYS.values())


def _percent(value: float | None) -> str:
    """A percentage as the table shows it: 66.67, or - for an empty subset's."""
    return "-" if value is None else f"{value:.2f}"


def f1_table(rows: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """For `dvc plots` (columns): subset, error_accuracy_pct, correct_accuracy_pct, f1_pct (an empty subset's
    None)."""
    return {"subset": [subset_label(r) for r in rows], **{key: [r[key] for r in rows] for key, _, _ in _BARS}}


def position_cap(labels: Sequence[int], predictions: Sequence[int | None]) -> int:
    """The last step the heat map shows on its own: the largest seen, at most POSITION_CAP."""
    seen = [index for index in (*labels, *predictions) if index is not None]
    return min(POSITION_CAP, max(seen, default=0))


def position_matrix(labels: Sequence[int], predictions: Sequence[int | None], cap: int) -> np.ndarray:
    """Counts: rows the true first error (none, 0, 1, ..., cap, where cap holds every step from it on),
    columns the prediction (the same, then "no vote")."""
    size = cap + 2
    counts = np.zeros((size, size + 1), dtype=np.int64)
    rows = np.array([_position(label, cap) for label in labels], dtype=np.int64)
    columns = np.array([size if p is None else _position(p, cap) for p in predictions], dtype=np.int64)
    np.add.at(counts, (rows, columns), 1)
    return counts


def _position(index: int, cap: int) -> int:
    return 0 if index == -1 else min(index, cap) + 1


def plot_critique(rows: Sequence[dict[str, Any]], labels: Sequence[int], predictions: Sequence[int | None],
                  path: Path, *, simulated: bool) -> None:
    figure = Figure(figsize=(12.5, max(4.2, 0.45 * len(rows) + 2.2)), layout="constrained")
    bars_axis, heat_axis = figure.subplots(1, 2, width_ratios=(1, 1.15))
    _draw_bars(bars_axis, rows)
    cap = position_cap(labels, predictions)
    _draw_positions(figure, heat_axis, position_matrix(labels, predictions, cap), cap)
    figure.suptitle(titled("Step-level critique: first-error identification", simulated))
    save_png(figure, path)


def _draw_bars(axis: Any, rows: Sequence[dict[str, Any]]) -> None:
    names = [f"{subset_label(r)} ({r['n_error']}+{r['n_correct']})" for r in rows]
    positions = np.arange(len(rows))
    height = 0.8 / len(_BARS)
    for offset, (key, label, colour) in enumerate(_BARS):
        values = [0.0 if r[key] is None else r[key] for r in rows]  # labelled "-", not 0.0
        bars = axis.barh(positions + (offset - 1) * height, values, height=height, color=colour, label=label)
        axis.bar_label(bars, labels=[_percent(r[key]) for r in rows], fontsize=7, padding=2)
    axis.set_yticks(positions, names, fontsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0, 112)
    axis.set_xticks(range(0, 101, 20))
    axis.set_xlabel("% (-: the subset has no solution of that kind, or F1 lacks one of its accuracies)")
    axis.set_title("scores per dataset/task (with error + without)", fontsize=10)
    axis.grid(axis="x", alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")


def heat_map_rows(counts: np.ndarray, cap: int) -> list[tuple[int, str]]:
    """(row of position_matrix, its label) for the rows the heat map shows: those some solution has.

    Rows none, 0, 1, 2 holding 3, 1, 0, 2 solutions -> [(0, "none (n=3)"), (1, "0 (n=1)"), (3, "2 (n=2)")].
    """
    names = ["none", *position_names(cap)]
    totals = counts.sum(axis=1)
    return [(int(row), f"{names[row]} (n={totals[row]})") for row in np.flatnonzero(totals)]


def position_names(cap: int) -> list[str]:
    """"0", "1", ..., and the cap: "10+" when it holds every later step too."""
    return [str(i) for i in range(cap)] + [f"{cap}+" if cap == POSITION_CAP else str(cap)]


def _draw_positions(figure: Figure, axis: Any, counts: np.ndarray, cap: int) -> None:
    rows = heat_map_rows(counts, cap)
    counts = counts[[row for row, _ in rows]]
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    image = axis.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    for row, column in zip(*np.nonzero(counts), strict=True):
        axis.text(column, row, str(counts[row, column]), ha="center", va="center", fontsize=7,
                  color="white" if shares[row, column] > 0.6 else "black")
    axis.set_yticks(range(len(rows)), [name for _, name in rows], fontsize=8)
    axis.set_xticks(range(counts.shape[1]), ["none", *position_names(cap), "no vote"], fontsize=8, rotation=45)
    axis.set_ylabel("true first wrong step")
    axis.set_xlabel("predicted first wrong step (majority vote)")
    axis.set_title("where the vote put the first error (colour: share of the row; text: count)", fontsize=10)
    figure.colorbar(image, ax=axis, shrink=0.8)
