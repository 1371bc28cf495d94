"""The report's plots and the curve behind them: accuracy vs K, and confidence of correct vs incorrect."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure  # the object API draws to files without a GUI backend

from tracevote.fileio import atomic_path
from tracevote.report import method_label
from tracevote.results import AggregateResult


def accuracy_curve(result: AggregateResult) -> pd.DataFrame:
    """Columns k, then per method its mean accuracy and `<method>_std`, one row per K."""
    table: dict[str, list[float]] = {"k": list(result.k)}
    for method in result.methods:
        rows = [result.accuracy_at(method, k) for k in result.k]
        table[method] = [r.mean for r in rows]
        table[f"{method}_std"] = [r.std for r in rows]
    return pd.DataFrame(table)


MEASURE_COLOURS = {"pass1": "black", "cons": "tab:gray", "avg": "tab:blue", "bottom10": "tab:orange",
                   "lowest": "tab:green", "tail": "tab:red"}


def plot_accuracy(curve: pd.DataFrame, methods: tuple[str, ...], path: Path, *, simulated: bool) -> None:
    """One colour per measure; solid = all samples vote, dashed = top-10% kept, dotted = top-90% kept."""
    figure = Figure(figsize=(9, 6))
    axis = figure.subplots()
    for method in methods:
        mean, std = curve[method].to_numpy(), curve[f"{method}_std"].to_numpy()
        measure, _, top = method.partition("_top")
        colour = MEASURE_COLOURS.get(measure)
        style = {"": "-", "10": "--"}.get(top, ":")
        axis.plot(curve["k"], 100 * mean, style, color=colour, marker="o", markersize=3,
                  label=method_label(method, "K"))
        axis.fill_between(curve["k"], 100 * (mean - std), 100 * (mean + std), color=colour, alpha=0.05)
    axis.set_xscale("log", base=2)
    axis.set_xlabel("K (samples voted on)")
    axis.set_ylabel("accuracy (%)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, ncol=2)
    axis.set_title(_title("Accuracy vs K (bands: ±1 std over repeats)", simulated))
    _save(figure, path)


def plot_confidence(scores: pd.DataFrame, measures: tuple[str, ...], path: Path, *, simulated: bool) -> None:
    valid = scores[scores["valid"]]
    figure = Figure(figsize=(4 * len(measures), 4))
    axes = figure.subplots(1, len(measures), squeeze=False)
    for axis, measure in zip(axes[0], measures, strict=True):
        for correct, colour in ((True, "tab:green"), (False, "tab:red")):
            values = valid.loc[valid["correct"] == correct, measure].dropna().to_numpy()
            if values.size:
                axis.hist(values, bins=40, alpha=0.5, density=True, color=colour,
                          label=f"{'correct' if correct else 'incorrect'} (n={values.size})")
        axis.set_title(measure)
        axis.set_xlabel("confidence")
        axis.legend(fontsize=7)
    figure.suptitle(_title("Trace confidence, correct vs incorrect", simulated))
    _save(figure, path)


def _title(text: str, simulated: bool) -> str:
    return f"SIMULATED — {text}" if simulated else text


def _save(figure: Figure, path: Path) -> None:
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
