"""The report's plots and the curve behind them: accuracy vs K, and confidence of correct vs incorrect. They draw
from columns by name (plain lists or arrays, or a pandas frame's), so the report stage loads no pandas."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure  # the object API draws to files without a GUI backend

from tracevote.core.arrow_numpy import array_numpy
from tracevote.core.csvtext import frame_columns
from tracevote.core.parquet import read_parquet
from tracevote.deepconf.results import AggregateResult
from tracevote.report.figures import MIN_WIDTH_IN, TITLE_Y, plot_csv, save_png, set_margins, titled
from tracevote.report.tables import method_label

if TYPE_CHECKING:  # only the study's tables are frames (dvc_plot_csv); pandas is ~0.4 CPU s of a stage's start
    import pandas as pd

# One colour and style per role, the same in every panel, so a single legend serves them all.
BASELINE_STYLES = {"pass1": ("Pass@1", "black", ":"), "cons": ("Cons@K (majority vote)", "tab:gray", "--")}
WEIGHTED_STYLE = ("measure@K (weighted vote, all samples)", "tab:blue", "-")
TOP_COLOURS = ("tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink")
ONLINE_COLOURS = ("magenta", "tab:cyan", "tab:olive", "navy")  # tab:red is the debate's
K_LABEL = "K (samples voted on)"
ONLINE_MEASURE = "lowest"  # online DeepConf weighs and filters by the lowest-group confidence
Line = tuple[str, str, str, str]  # method, legend label, colour, line style
Columns = Mapping[str, Any]  # column name -> its values (a list, an array, or a frame's Series)


def accuracy_curve(result: AggregateResult) -> dict[str, list[Any]]:
    """Columns k, then per method its mean accuracy, `<method>_std`, `<method>_ci_low` and `<method>_ci_high`
    (fractions); one row per K. Online methods come after the others, empty (None) below their warmup."""
    table: dict[str, list[float | None]] = {"k": list(result.k)}
    rows_by_method: list[tuple[str, list[Any]]] = [
        *((method, [result.accuracy_at(method, k) for k in result.k]) for method in result.methods),
        *((method, [result.online_at(method, k) for k in result.k]) for method in result.online_methods)]
    for method, rows in rows_by_method:
        for suffix, field in (("", "mean"), ("_std", "std"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            table[f"{method}{suffix}"] = [None if row is None else getattr(row, field) for row in rows]
    return table


def panel_methods(methods: tuple[str, ...], measure: str) -> list[Line]:
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


def online_styles(methods: tuple[str, ...]) -> list[Line]:
    """(method, legend label, colour, line style) of each online method."""
    return [(method, f"{method_label(method, 'K')} (replayed)", colour, "-.")
            for method, colour in zip(methods, ONLINE_COLOURS, strict=False)]


def plot_accuracy(curve: Columns, methods: tuple[str, ...], path: Path, *, simulated: bool,
                  online_methods: tuple[str, ...] = (), ci_level: float | None = None) -> None:
    save_png(accuracy_figure(curve, methods, simulated=simulated, online_methods=online_methods,
                             ci_level=ci_level), path)


def accuracy_figure(curve: Columns, methods: tuple[str, ...], *, simulated: bool,
                    online_methods: tuple[str, ...] = (), ci_level: float | None = None) -> Figure:
    """Small multiples: a row per confidence measure (then one of the online methods), a panel per voting method,
    each drawing that method and Cons@K as lines over light bands of their intervals (bootstrap, else ±1 std),
    with Pass@1 as a thin reference line. One method per panel, so each reads at a glance."""
    rows = accuracy_rows(methods, online_methods)
    columns = max(len(lines) for _, lines in rows)
    figure = Figure(figsize=(max(3.6 * columns, MIN_WIDTH_IN), 2.5 * len(rows) + 1.2))
    axes = figure.subplots(len(rows), columns, sharex=True, sharey=True, squeeze=False)
    # below the panels: K's tick labels and axis label, then the legend's rows (three labels a row)
    legend_rows = -(-(len(BASELINE_STYLES) + sum(len(lines) for _, lines in rows)) // 3)
    set_margins(figure, (len(rows), columns), left=0.8, right=0.15, top=0.75, bottom=0.55 + 0.2 * legend_rows,
                wspace=0.15, hspace=0.4)
    baselines = [(method, *BASELINE_STYLES[method]) for method in BASELINE_STYLES if method in curve]
    axes[0][0].set_xscale("log", base=2)  # sharex: one call sets every panel's (each call rescales them all)
    for (row_name, lines), row_axes in zip(rows, axes, strict=True):
        for axis, line in zip(row_axes, lines, strict=False):
            for method, label, colour, style in [*baselines, line]:
                _draw_line(axis, curve, method, label, colour, style, band=method != "pass1")
            axis.set_title(method_label(line[0], "K"), fontsize=9, y=TITLE_Y)
            _k_axis(axis)
        row_axes[0].set_ylabel(f"{row_name}\naccuracy (%)")
        for axis in row_axes[len(lines):]:
            axis.set_visible(False)
    _k_ticks(axes[0][0], np.asarray(curve["k"]))  # after every line: the K range is the view of all
    _label_outer(axes)
    _shared_legend(figure, axes)
    bands = f"{100 * ci_level:.0f}% bootstrap intervals" if ci_level is not None else "±1 std"
    figure.suptitle(titled(f"Accuracy vs K (lines: mean over repeats; bands: {bands})", simulated))
    return figure


def _shared_legend(figure: Figure, axes: np.ndarray) -> None:
    """One legend below the panels, each label once (every panel draws the baselines)."""
    legend: dict[str, Any] = {}
    for axis in axes.ravel():
        legend.update(zip(*reversed(axis.get_legend_handles_labels()), strict=True))
    figure.legend(list(legend.values()), list(legend), loc="lower center", ncol=3, fontsize=8, frameon=False)


def _label_outer(axes: np.ndarray) -> None:
    """Shared axes: tick labels only on the outer edges, the lowest visible panel of each column included."""
    for axis in axes.ravel():
        axis.label_outer()
    for column in axes.T:
        lowest = [axis for axis in column if axis.get_visible()][-1]
        lowest.tick_params(labelbottom=True)
        lowest.set_xlabel(K_LABEL)


def accuracy_rows(methods: tuple[str, ...], online_methods: tuple[str, ...]) -> list[tuple[str, list[Line]]]:
    """(row name, its methods) of the accuracy figure: one row per confidence measure, then the online methods.

    (("pass1", "cons", "avg", "avg_top10"), ("online_low",)) ->
    [("avg", [avg, avg_top10]), ("online (lowest, replayed)", [online_low])], each method with its style.
    """
    measures = [m for m in methods if m not in BASELINE_STYLES and "_top" not in m]
    rows = [(measure, [line for line in panel_methods(methods, measure) if line[0] not in BASELINE_STYLES])
            for measure in measures]
    if online_methods:
        rows.append((f"online ({ONLINE_MEASURE}, replayed)", online_styles(online_methods)))
    return rows


def _draw_line(axis: Axes, curve: Columns, method: str, label: str, colour: str, style: str, *,
               band: bool = True) -> None:
    """The method's mean over K as a line, over a light band of its interval."""
    k = _floats(curve["k"])
    mean = 100 * _floats(curve[method])
    if band:
        if f"{method}_ci_low" in curve and not np.isnan(_floats(curve[f"{method}_ci_low"])).all():
            low, high = (100 * _floats(curve[f"{method}_ci_{side}"]) for side in ("low", "high"))
        else:
            std = 100 * _floats(curve[f"{method}_std"])
            low, high = mean - std, mean + std
        axis.fill_between(k, low, high, color=colour, alpha=0.15, linewidth=0)
    axis.plot(k, mean, linestyle=style, color=colour, marker="o", markersize=2.5, linewidth=1.6 if band else 1.1,
              label=label)


def _floats(values: Any) -> np.ndarray:
    """A column as float64, a missing value (None) as NaN."""
    return np.asarray(values, dtype=np.float64)


def _k_ticks(axis: Axes, ks: np.ndarray) -> None:
    """A labelled tick at every evaluated K of a log2 K axis, the largest included. Shared axes share their tick
    locators and formatters, so one call sets every panel's; a call per panel costs a panel count squared of view
    updates (~0.1 CPU s a report)."""
    axis.set_xticks(ks, [str(int(k)) for k in ks])
    axis.minorticks_off()


def _k_axis(axis: Axes) -> None:
    """What each panel keeps of its own: the size of its K labels, the K axis label, the grid."""
    axis.tick_params(axis="x", labelsize=8)
    axis.set_xlabel(K_LABEL)
    axis.grid(alpha=0.3)


def read_confidences(path: Path, measures: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The score table's columns the confidence figure draws (valid, correct, each measure), through pyarrow alone
    (its read_table and to_numpy load pandas)."""
    table = read_parquet(path, ["valid", "correct", *measures])
    return {"valid": array_numpy(table["valid"], bool), "correct": array_numpy(table["correct"], bool),
            **{measure: array_numpy(table[measure], np.float64) for measure in measures}}


def plot_confidence(scores: Columns, measures: tuple[str, ...], path: Path, *, simulated: bool) -> None:
    save_png(confidence_figure(scores, measures, simulated=simulated), path)


def confidence_figure(scores: Columns, measures: tuple[str, ...], *, simulated: bool) -> Figure:
    """A panel per measure: the histograms of the valid traces' confidence, correct beside incorrect."""
    valid, correct_rows = np.asarray(scores["valid"], dtype=bool), np.asarray(scores["correct"], dtype=bool)
    figure = Figure(figsize=(max(4 * len(measures), MIN_WIDTH_IN), 4))
    axes = figure.subplots(1, len(measures), squeeze=False)
    set_margins(figure, (1, len(measures)), left=0.7, right=0.15, top=0.6, bottom=0.5, wspace=0.45)
    for axis, measure in zip(axes[0], measures, strict=True):
        # one set of bins for both classes, so their bars line up and their heights compare
        confidence = _floats(scores[measure])
        shown = valid & ~np.isnan(confidence)
        bins = np.histogram_bin_edges(confidence[shown], bins=40)
        for correct, colour in ((True, "tab:green"), (False, "tab:red")):
            values = confidence[shown & (correct_rows == correct)]
            if values.size:
                axis.hist(values, bins=bins, alpha=0.5, density=True, color=colour, histtype="stepfilled",
                          label=f"{'correct' if correct else 'incorrect'} (n={values.size})")
        axis.set_title(measure, y=TITLE_Y)
        axis.set_xlabel("confidence (higher: more confident)")
        axis.legend(fontsize=7)
    axes[0][0].set_ylabel("density (each histogram integrates to 1)")
    figure.suptitle(titled("Trace confidence, correct vs incorrect valid traces", simulated))
    return figure


def dvc_plot_csv(table: pd.DataFrame, *, simulated: bool, float_format: str) -> str:
    """A frame as figures.plot_csv writes columns for `dvc plots` (the study's tables)."""
    return plot_csv(frame_columns(table), simulated=simulated, float_format=float_format)
