"""The report's plots and the curve behind them: accuracy vs K, and confidence of correct vs incorrect."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # the object API draws to files without a GUI backend

from tracevote.core.fileio import atomic_path
from tracevote.deepconf.results import AggregateResult
from tracevote.report.tables import method_label

# One colour and style per role, the same in every panel, so a single legend serves them all.
BASELINE_STYLES = {"pass1": ("Pass@1", "black", ":"), "cons": ("Cons@K (majority vote)", "tab:gray", "--")}
WEIGHTED_STYLE = ("measure@K (weighted vote, all samples)", "tab:blue", "-")
TOP_COLOURS = ("tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink")
ONLINE_COLOURS = ("magenta", "tab:cyan", "tab:olive", "navy")  # tab:red is the debate's
ONLINE_MEASURE = "lowest"  # online DeepConf weighs and filters by the lowest-group confidence: drawn in its panel


def accuracy_curve(result: AggregateResult) -> pd.DataFrame:
    """Columns k, then per method its mean accuracy, `<method>_std`, `<method>_ci_low` and `<method>_ci_high`,
    then log2_k; one row per K. Online methods come after the others, empty below their warmup.

    log2_k is the x axis of `dvc plots show`, whose templates have no log scale.
    """
    table: dict[str, list[float | None]] = {"k": list(result.k)}
    rows_by_method: list[tuple[str, list[Any]]] = [
        *((method, [result.accuracy_at(method, k) for k in result.k]) for method in result.methods),
        *((method, [result.online_at(method, k) for k in result.k]) for method in result.online_methods)]
    for method, rows in rows_by_method:
        for suffix, field in (("", "mean"), ("_std", "std"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            table[f"{method}{suffix}"] = [None if row is None else getattr(row, field) for row in rows]
    table["log2_k"] = [math.log2(k) for k in result.k]
    return pd.DataFrame(table)


def panel_methods(methods: tuple[str, ...], measure: str) -> list[tuple[str, str, str, str]]:
    """(method, legend label, colour, line style) for one measure's panel.

    ("pass1", "cons", "avg", "avg_top10", "tail") with "avg" ->
    pass1, cons, avg, then avg_top10 labelled "top-10% (weighted vote, most confident 10% kept)".
    """
    lines = [(method, *BASELINE_STYLES[method]) for method in methods if method in BASELINE_STYLES]
    if measure in methods:
        lines.append((measure, *WEIGHTED_STYLE))
    tops = [method for method in methods if method.startswith(f"{measure}_top")]
    for colour, method in zip(TOP_COLOURS, sorted(tops, key=_top_percent), strict=False):
        percent = _top_percent(method)
        lines.append((method, f"top-{percent}%@K (weighted vote, most confident {percent}% kept)", colour, "-"))
    return lines


def _top_percent(method: str) -> int:
    return int(method.rpartition("_top")[2])


def online_styles(methods: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """(method, legend label, colour, line style) of each online method."""
    return [(method, f"{method_label(method, 'K')} (replayed)", colour, "-.")
            for method, colour in zip(methods, ONLINE_COLOURS, strict=False)]


def plot_accuracy(curve: pd.DataFrame, methods: tuple[str, ...], path: Path, *, simulated: bool,
                  online_methods: tuple[str, ...] = (), ci_level: float | None = None) -> None:
    """One panel per confidence measure, each with Pass@1, Cons@K, measure@K and its top-η% variants; the online
    methods in the `lowest` panel. Bands are the bootstrap intervals (±1 std without them)."""
    measures = [m for m in methods if m not in BASELINE_STYLES and "_top" not in m]
    columns = 2 if len(measures) > 1 else 1
    rows = -(-len(measures) // columns)
    figure = Figure(figsize=(5.2 * columns, 3.6 * rows + 1.0), layout="constrained")
    axes = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False).ravel()
    for axis, measure in zip(axes, measures, strict=False):
        lines = panel_methods(methods, measure)
        if measure == ONLINE_MEASURE or (ONLINE_MEASURE not in measures and axis is axes[0]):
            lines += online_styles(online_methods)
        for position, (method, label, colour, style) in enumerate(lines):
            _draw_line(axis, curve, method, label, colour, style, nudge=(position - (len(lines) - 1) / 2) * 0.035)
        axis.set_title(f"confidence measure: {measure}", fontsize=10)
        _k_axis(axis, curve["k"].to_numpy())
    for axis in axes[len(measures):]:
        axis.set_visible(False)
    for axis in axes[: len(measures)]:
        axis.set_ylabel("accuracy (%)")
        axis.label_outer()  # shared axes: label only the outer edges
    legend = {}
    for axis in axes[: len(measures)]:
        legend.update(zip(*reversed(axis.get_legend_handles_labels()), strict=True))
    figure.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    bars = f"{100 * ci_level:.0f}% bootstrap intervals" if ci_level is not None else "±1 std"
    figure.suptitle(titled(f"Accuracy vs K (lines: mean over repeats; bars, and Cons@K's band: {bars})", simulated))
    save_png(figure, path)


def _draw_line(axis: Axes, curve: pd.DataFrame, method: str, label: str, colour: str, style: str,
               nudge: float = 0.0) -> None:
    """The method's mean over K, and its interval: a band for Cons@K, the baseline, and bars for the others,
    each method's bars nudged sideways by `nudge` (in log2 K) so that they do not hide each other."""
    k = curve["k"].to_numpy(dtype=np.float64)
    mean = 100 * curve[method].to_numpy(dtype=np.float64)
    if f"{method}_ci_low" in curve and curve[f"{method}_ci_low"].notna().any():
        low, high = (100 * curve[f"{method}_ci_{side}"].to_numpy(dtype=np.float64) for side in ("low", "high"))
    else:
        std = 100 * curve[f"{method}_std"].to_numpy(dtype=np.float64)
        low, high = mean - std, mean + std
    axis.plot(k, mean, linestyle=style, color=colour, marker="o", markersize=3, linewidth=1.6, label=label)
    if method == "cons":
        axis.fill_between(k, low, high, color=colour, alpha=0.12, linewidth=0)
        return
    axis.errorbar(k * 2**nudge, mean, yerr=[mean - low, high - mean], fmt="none", ecolor=colour, alpha=0.55,
                  elinewidth=0.9, capsize=1.5)


def _k_axis(axis: Axes, ks: np.ndarray) -> None:
    """A log2 K axis with a labelled tick at every evaluated K, the largest included."""
    axis.set_xscale("log", base=2)
    axis.set_xticks(ks, [str(int(k)) for k in ks], fontsize=8)
    axis.minorticks_off()
    axis.set_xlabel("K (samples voted on)")
    axis.grid(alpha=0.3)


def plot_confidence(scores: pd.DataFrame, measures: tuple[str, ...], path: Path, *, simulated: bool) -> None:
    valid = scores[scores["valid"]]
    figure = Figure(figsize=(4 * len(measures), 4), layout="constrained")
    axes = figure.subplots(1, len(measures), squeeze=False)
    for axis, measure in zip(axes[0], measures, strict=True):
        # one set of bins for both classes, so their bars line up and their heights compare
        bins = np.histogram_bin_edges(valid[measure].dropna().to_numpy(), bins=40)
        for correct, colour in ((True, "tab:green"), (False, "tab:red")):
            values = valid.loc[valid["correct"] == correct, measure].dropna().to_numpy()
            if values.size:
                axis.hist(values, bins=bins, alpha=0.5, density=True, color=colour,
                          label=f"{'correct' if correct else 'incorrect'} (n={values.size})")
        axis.set_title(measure)
        axis.set_xlabel("confidence (higher: more confident)")
        axis.legend(fontsize=7)
    axes[0][0].set_ylabel("density (each histogram integrates to 1)")
    figure.suptitle(titled("Trace confidence, correct vs incorrect valid traces", simulated))
    save_png(figure, path)


def titled(text: str, simulated: bool) -> str:
    return f"SIMULATED — {text}" if simulated else text


def save_png(figure: Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
