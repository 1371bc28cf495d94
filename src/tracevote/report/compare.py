"""Voting over a pool beside debate, on the same problems: one table and one plot of accuracy against
completion tokens per problem.

Voting at K costs K traces per problem: K x the mean completion tokens of a trace (the mean over problems
of each problem's mean). DeepConf's offline filtering keeps a share of the K traces it has already
generated, so it costs what Cons@K costs. Online DeepConf (replayed on the pool) costs the tokens its
traces spent before they stopped. Debate costs what its calls cost (every completion token of every
agent and the judge). Datasets are pooled problem-weighted: accuracies and tokens weighted by problem counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from matplotlib.figure import Figure

from tracevote.core.arrow_numpy import array_numpy
from tracevote.core.mdtext import md_text
from tracevote.core.parquet import read_parquet
from tracevote.deepconf.results import AggregateResult
from tracevote.report.figures import TITLE_Y, save_png, set_margins, titled
from tracevote.report.plots import BASELINE_STYLES, online_styles, panel_methods
from tracevote.report.tables import SIMULATED_BANNER, method_label, percent

DEBATE_STYLE = {"marker": "*", "markersize": 15, "color": "tab:red", "linestyle": "none"}


@dataclass(frozen=True)
class VotingCurve:
    """Voting accuracy per method and K, pooled over datasets; and what a trace costs."""

    k: tuple[int, ...]
    methods: tuple[str, ...]
    accuracy: dict[str, tuple[float, ...]]  # method -> accuracy at each K
    tokens_per_trace: float
    problems: int
    online: dict[str, tuple[OnlinePoint, ...]] = field(default_factory=dict)  # online method -> its points over K

    def tokens_at(self, k: int) -> float:
        return k * self.tokens_per_trace


@dataclass(frozen=True)
class OnlinePoint:
    k: int
    accuracy: float
    tokens: float  # completion tokens per problem


@dataclass(frozen=True)
class DebatePoint:
    accuracy: float
    completion_tokens: float  # per problem
    calls: float  # per problem
    problems: int


def load_voting(aggregate_dir: Path, scores_dir: Path, datasets: Sequence[str]) -> tuple[VotingCurve, bool]:
    """The pooled curve of `datasets` from their aggregate JSON and score tables, and whether any was simulated."""
    parts, simulated = [], False
    for name in datasets:
        stored = orjson.loads((aggregate_dir / f"{name}.json").read_bytes())  # a checked name: core.config.DATASET_NAME
        simulated |= bool(stored["simulated"])
        parts.append((AggregateResult.from_json(stored["result"]), TraceTokens.read(scores_dir / f"{name}.parquet")))
    return voting_curve(parts), simulated


@dataclass(frozen=True)
class TraceTokens:
    """A score table's two columns that price a trace: each trace's problem and completion tokens."""

    problem_ids: list[str]
    n_tokens: np.ndarray  # float64

    @classmethod
    def read(cls, path: Path) -> TraceTokens:
        """From a score table on disk, through pyarrow alone (its read_table and to_numpy load pandas)."""
        table = read_parquet(path, ["problem_id", "n_tokens"])
        return cls(table["problem_id"].to_pylist(), array_numpy(table["n_tokens"], np.float64))

    def problem_means(self) -> np.ndarray:
        """Each problem's mean completion tokens, problems in sorted order: ids a, b, a with 10, 30, 20 -> [15, 30]."""
        rank = {problem: i for i, problem in enumerate(sorted(set(self.problem_ids)))}
        problem = np.fromiter((rank[p] for p in self.problem_ids), dtype=np.int64, count=len(self.problem_ids))
        return np.bincount(problem, weights=self.n_tokens) / np.bincount(problem)


def voting_curve(parts: Sequence[tuple[AggregateResult, TraceTokens]]) -> VotingCurve:
    """Pool (aggregate, scores table) pairs of several datasets: each weighs by its problems."""
    first = parts[0][0]
    sizes = np.array([result.validity.n_problems for result, _ in parts], dtype=float)
    accuracy = {method: tuple(float(np.average([r.accuracy_at(method, k).mean for r, _ in parts], weights=sizes))
                              for k in first.k)
                for method in first.methods}
    return VotingCurve(first.k, first.methods, accuracy, tokens_per_trace([scores for _, scores in parts]),
                       int(sizes.sum()),
                       _online_points([result for result, _ in parts], sizes))


def tokens_per_trace(score_tables: Sequence[TraceTokens]) -> float:
    """What a trace costs: the mean over problems (of every table) of each problem's mean completion tokens."""
    return float(np.concatenate([table.problem_means() for table in score_tables]).mean())


def _online_points(results: Sequence[AggregateResult], sizes: np.ndarray) -> dict[str, tuple[OnlinePoint, ...]]:
    """Each online method at every K that every dataset ran it at, pooled problem-weighted."""
    points = {}
    for method in results[0].online_methods:
        ks = [k for k in results[0].k if all(r.online_at(method, k) is not None for r in results)]
        rows = [[r.online_at(method, k) for r in results] for k in ks]
        points[method] = tuple(
            OnlinePoint(k, float(np.average([row.mean for row in at_k], weights=sizes)),
                        float(np.average([row.tokens for row in at_k], weights=sizes)))
            for k, at_k in zip(ks, rows, strict=True))
    return points


def debate_point(problems: Sequence[dict[str, Any]]) -> DebatePoint:
    """From metrics/debate_results.json's per-problem records (of the datasets compared)."""
    return DebatePoint(accuracy=float(np.mean([p["correct"] for p in problems])),
                       completion_tokens=float(np.mean([p["completion_tokens"] for p in problems])),
                       calls=float(np.mean([p["calls"] for p in problems])), problems=len(problems))


def comparison_rows(curve: VotingCurve | None, point: DebatePoint, k: int, agents: int) -> list[dict[str, Any]]:
    """Pass@1, Cons@K and every DeepConf method at K, online DeepConf at K (what its stopped traces spent), Cons@K
    at the largest K within the debate's budget, and the debate; accuracy in %, completion tokens per problem, and
    the problems each row covers (the pool's for a vote, the debated ones for the debate)."""
    rows = []
    if curve is not None:
        at = curve.k.index(k)
        voted = curve.problems
        # Pass@1 is the mean over single traces: its estimate at the largest K uses the most of the pool
        rows.append(_row("pass1", "Pass@1", 1, curve.accuracy["pass1"][-1], curve.tokens_at(1), voted))
        rows += [_row(method, method_label(method, k), k, curve.accuracy[method][at], curve.tokens_at(k), voted)
                 for method in curve.methods if method != "pass1"]
        rows += [_row(method, method_label(method, k), k, p.accuracy, p.tokens, voted)
                 for method, points in curve.online.items() for p in points if p.k == k]
        affordable = [i for i, kk in enumerate(curve.k) if curve.tokens_at(kk) <= point.completion_tokens]
        if affordable:
            i = affordable[-1]
            rows.append(_row("cons", f"{method_label('cons', curve.k[i])} (within the debate's tokens)", curve.k[i],
                             curve.accuracy["cons"][i], curve.tokens_at(curve.k[i]), voted))
    rows.append(_row("debate", f"Debate (DyLAN, {agents} agents, {point.calls:.1f} calls/problem)", None,
                     point.accuracy, point.completion_tokens, point.problems))
    return rows


def _row(method: str, label: str, k: int | None, accuracy: float, tokens: float, problems: int) -> dict[str, Any]:
    return {"method": method, "label": label, "k": k, "accuracy_pct": percent(accuracy),
            "completion_tokens_per_problem": round(tokens, 1), "problems": problems}


CURVE_COLUMNS = ("method", "label", "k", "completion_tokens_per_problem", "accuracy_pct")


def curve_table(curve: VotingCurve | None, point: DebatePoint) -> dict[str, list[Any]]:
    """One row per plotted point, columns CURVE_COLUMNS (accuracy in %; the debate's k empty): every voting method
    at every K (Pass@1 once, at one trace), every online method at every K it ran, and the debate (no K)."""
    rows = []
    if curve is not None:
        rows.append(("pass1", "Pass@1", 1, curve.tokens_at(1), curve.accuracy["pass1"][-1]))
        rows += [(method, method_label(method, "K"), k, curve.tokens_at(k), curve.accuracy[method][i])
                 for method in curve.methods if method != "pass1" for i, k in enumerate(curve.k)]
        rows += [(method, method_label(method, "K"), p.k, p.tokens, p.accuracy)
                 for method, points in curve.online.items() for p in points]
    rows.append(("debate", "Debate (DyLAN)", None, point.completion_tokens, point.accuracy))
    table = {column: list(values) for column, values in zip(CURVE_COLUMNS, zip(*rows, strict=True), strict=True)}
    table["accuracy_pct"] = [100 * accuracy for accuracy in table["accuracy_pct"]]
    return table


def render_markdown(rows: list[dict[str, Any]], datasets: Sequence[str], *, simulated: bool, note: str = "") -> str:
    """The table, under a line counting the problems each kind of row covers: the pool's problems for the votes,
    the debated ones for the debate (fewer with debate.problems), with a warning when they differ."""
    lines = [f"**{SIMULATED_BANNER}**", ""] if simulated else []
    shown = ', '.join(map(md_text, datasets)) or 'no shared dataset'
    lines += [f"Accuracy and completion tokens per problem on {shown}: "
              f"{coverage(rows)}.", ""]
    if note:
        lines += [md_text(note), ""]
    lines += ["| method | K | problems | accuracy (%) | completion tokens / problem |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {md_text(r['label'])} | {r['k'] if r['k'] is not None else ''} | {r['problems']} | "
              f"{r['accuracy_pct']:.2f} | {r['completion_tokens_per_problem']:,.0f} |" for r in rows]
    return "\n".join(lines) + "\n"


def coverage(rows: Sequence[dict[str, Any]]) -> str:
    """"voting rows 30 problems, the debate 2 (debate.problems): not the same problems" when they differ."""
    debated = next(r["problems"] for r in rows if r["method"] == "debate")
    voted = {r["problems"] for r in rows if r["method"] != "debate"}
    if not voted:
        return f"the debate {_problems(debated)}"
    if voted == {debated}:
        return f"every row {_problems(debated)}"
    return (f"voting rows {_problems(max(voted))}, the debate {_problems(debated)} (debate.problems): the debate "
            "row is not on the same problems")


def _problems(count: int) -> str:
    return f"{count} problem" if count == 1 else f"{count} problems"


def plot_accuracy_vs_tokens(curve: VotingCurve | None, point: DebatePoint, path: Path, *, simulated: bool,
                            datasets: Sequence[str]) -> None:
    save_png(accuracy_vs_tokens_figure(curve, point, simulated=simulated, datasets=datasets), path)


def accuracy_vs_tokens_figure(curve: VotingCurve | None, point: DebatePoint, *, simulated: bool,
                              datasets: Sequence[str]) -> Figure:
    """One panel per confidence measure: Cons@K, measure@K and its top-η% variants as curves over K, online
    DeepConf as curves over K, Pass@1 and the debate as points; x is completion tokens per problem (log)."""
    methods = curve.methods if curve is not None else ()
    measures = [m for m in methods if m not in BASELINE_STYLES and "_top" not in m] or [""]
    columns = 2 if len(measures) > 1 else 1
    rows = -(-len(measures) // columns)
    figure = Figure(figsize=(5.4 * columns, 3.8 * rows + 1.0))
    axes = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False).ravel()
    axes[0].set_xscale("log")  # sharex: one call sets every panel's (each call rescales them all)
    for axis, measure in zip(axes, measures, strict=False):
        if curve is not None:
            _draw_voting(axis, curve, measure)
        axis.plot([point.completion_tokens], [100 * point.accuracy], label="Debate (DyLAN)", **DEBATE_STYLE)
        axis.grid(alpha=0.3)
        axis.set_title(f"confidence measure: {measure}" if measure else "debate", fontsize=10, y=TITLE_Y)
        axis.set_xlabel("completion tokens per problem (log)")
        axis.set_ylabel("accuracy (%)")
        axis.label_outer()
    for axis in axes[len(measures):]:
        axis.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    # below the panels: the token axis's tick labels and label, then the legend's rows (three labels a row)
    set_margins(figure, (rows, columns), left=0.75, right=0.15, top=0.65, bottom=0.6 + 0.2 * -(-len(labels) // 3),
                wspace=0.15, hspace=0.4)
    figure.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    figure.suptitle(titled(f"Accuracy vs completion tokens: voting over K traces, online DeepConf and debate "
                           f"({', '.join(datasets)})", simulated))
    return figure


def _draw_voting(axis: Any, curve: VotingCurve, measure: str) -> None:
    tokens = [curve.tokens_at(k) for k in curve.k]
    for method, label, colour, style in panel_methods(curve.methods, measure):
        values = [100 * a for a in curve.accuracy[method]]
        if method == "pass1":  # one trace per problem: a point at K=1
            axis.plot([curve.tokens_at(1)], [values[-1]], marker="o", color=colour, linestyle="none",
                      label="Pass@1 (one trace)")
            continue
        axis.plot(tokens, values, linestyle=style, color=colour, marker="o", markersize=3, linewidth=1.4,
                  label=label)
    for method, label, colour, style in online_styles(tuple(curve.online)):
        points = curve.online[method]
        axis.plot([p.tokens for p in points], [100 * p.accuracy for p in points], linestyle=style, color=colour,
                  marker="s", markersize=3, linewidth=1.4, label=label)
