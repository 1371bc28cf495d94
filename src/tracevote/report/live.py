"""A live online run's results: per method its accuracy with a bootstrap interval, what it cost, how its traces
ended; beside it Cons@K and the replay on the same traces of a pool, and the saving measured against them.

Every figure is per problem unless named a total. The saving is measured only where a pool of the same setting
holds the live run's traces 0..budget-1 in full: live completion tokens billed against every token of those
traces (Cons@K at K = budget). Without one, the summary says why and prints no saving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tracevote.core.csvtext import frame_csv
from tracevote.deepconf.live_results import LiveProblem, SameTraces
from tracevote.deepconf.uncertainty import bootstrap_rng, intervals, resample_weights
from tracevote.report.plots import BASELINE_STYLES, ONLINE_COLOURS, save_png, titled
from tracevote.report.tables import method_label


@dataclass(frozen=True)
class LiveMethod:
    """One live method over every problem."""

    accuracy_pct: float
    ci_low_pct: float
    ci_high_pct: float
    answered_pct: float
    completion_tokens: float  # billed, per problem
    received_tokens: float
    kept_tokens: float
    counted_by_client_pct: float  # share of the billed completion tokens the client counted (no usage sent)
    prompt_tokens_unknown: int  # traces, in all, whose prompt tokens the server did not report
    usd: float  # per problem
    traces_started: int  # in all
    traces_stopped: int
    traces_cancelled: int
    started_before_decision: int
    traces_started_per_problem: float


@dataclass(frozen=True)
class Comparison:
    """Cons@K and the replay on the live run's traces, generated in full by a pool of the same setting."""

    cons_accuracy_pct: float
    cons_tokens: float  # per problem
    replay_accuracy_pct: dict[str, float]
    replay_tokens: dict[str, float]
    saving_vs_cons_pct: dict[str, float]  # 1 - live billed / Cons@K's tokens, measured


def summarize(problems: Sequence[LiveProblem], methods: Sequence[str], *, bootstrap: int, seed: int,
              level: float, budget: int) -> dict[str, LiveMethod]:
    """Each method's figures over its problems (one LiveProblem per problem and method)."""
    by_method = {name: [p for p in problems if p.method == name] for name in methods}
    n_problems = len(by_method[methods[0]])
    correct = np.array([[p.correct for p in by_method[name]] for name in methods])[:, :, None]
    weights = resample_weights(n_problems, bootstrap, bootstrap_rng(seed, budget))
    interval = intervals(correct, weights, level)
    return {name: _method(rows, 100 * float(interval.mean[i]), 100 * float(interval.low[i]),
                          100 * float(interval.high[i]))
            for i, (name, rows) in enumerate(by_method.items())}


def _method(rows: list[LiveProblem], accuracy: float, low: float, high: float) -> LiveMethod:
    n = len(rows)
    billed = sum(p.billed for p in rows)
    return LiveMethod(
        accuracy_pct=accuracy, ci_low_pct=low, ci_high_pct=high,
        answered_pct=100 * sum(p.answered for p in rows) / n, completion_tokens=billed / n,
        received_tokens=sum(p.received for p in rows) / n, kept_tokens=sum(p.kept for p in rows) / n,
        counted_by_client_pct=100 * sum(p.counted_by_client for p in rows) / billed if billed else 0.0,
        prompt_tokens_unknown=sum(p.prompts_unknown for p in rows), usd=sum(p.usd for p in rows) / n,
        traces_started=sum(p.started for p in rows), traces_stopped=sum(p.stopped for p in rows),
        traces_cancelled=sum(p.cancelled for p in rows),
        started_before_decision=sum(p.after_decision for p in rows),
        traces_started_per_problem=sum(p.started for p in rows) / n)


def compare(same: Sequence[SameTraces], live: dict[str, LiveMethod]) -> Comparison:
    n = len(same)
    cons_tokens = sum(s.cons_tokens for s in same) / n
    return Comparison(
        cons_accuracy_pct=100 * sum(s.cons_correct for s in same) / n, cons_tokens=cons_tokens,
        replay_accuracy_pct={name: 100 * sum(s.replay_correct[name] for s in same) / n for name in live},
        replay_tokens={name: sum(s.replay_tokens[name] for s in same) / n for name in live},
        saving_vs_cons_pct={name: 100 * (1 - method.completion_tokens / cons_tokens) if cons_tokens else 0.0
                            for name, method in live.items()})


def summary_json(live: dict[str, LiveMethod], comparison: Comparison | None, absent: str | None,
                 context: dict[str, Any]) -> dict[str, Any]:
    """The metrics file: `context` (dataset, model, budget, ...), each live method, and the comparison on the same
    traces, or null with the reason it could not be made."""
    return {**context, "live": {name: asdict(method) for name, method in live.items()},
            "same_traces": None if comparison is None else asdict(comparison), "same_traces_absent": absent}


def table_markdown(live: dict[str, LiveMethod], comparison: Comparison | None, absent: str | None, *, budget: int,
                   simulated: bool) -> str:
    """The methods side by side: accuracy, tokens and dollars per problem, how the traces ended."""
    head = "SIMULATED model: these figures say the pipeline works, nothing about a real model.\n\n" if simulated else ""
    lines = ["| method | accuracy % (interval) | completion tokens / problem | received | kept | $ / problem | "
             "traces started | stopped | cancelled | started before the consensus decision |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in live.items():
        lines.append(f"| live {name} | {m.accuracy_pct:.1f} ({m.ci_low_pct:.1f}–{m.ci_high_pct:.1f}) | "
                     f"{m.completion_tokens:,.0f} | {m.received_tokens:,.0f} | {m.kept_tokens:,.0f} | "
                     f"{m.usd:.6f} | {m.traces_started} | {m.traces_stopped} | {m.traces_cancelled} | "
                     f"{m.started_before_decision} |")
    if comparison is not None:
        lines.append(f"| {method_label('cons', budget)} on the same traces | {comparison.cons_accuracy_pct:.1f} | "
                     f"{comparison.cons_tokens:,.0f} | | | | | | | |")
        for name in live:
            lines.append(f"| replay {name} on the same traces | {comparison.replay_accuracy_pct[name]:.1f} | "
                         f"{comparison.replay_tokens[name]:,.0f} | | | | | | | |")
    notes = ["", "Completion tokens are those billed: the server's usage where it sent one, else the tokens the client "
             "received (counted by the client)."]
    for name, m in live.items():
        if m.counted_by_client_pct:
            notes.append(f"live {name}: {m.counted_by_client_pct:.1f}% of its completion tokens were counted by the "
                         f"client; {m.prompt_tokens_unknown} traces' prompt tokens were not reported.")
    if comparison is None:
        notes.append(f"No saving is reported: {absent}.")
    else:
        notes += [f"live {name} used {comparison.saving_vs_cons_pct[name]:.1f}% fewer completion tokens than "
                  f"{method_label('cons', budget)} on the same traces (measured)." for name in live]
    return head + "\n".join(lines + notes) + "\n"


def problems_csv(problems: Sequence[LiveProblem]) -> str:
    return frame_csv(pd.DataFrame([asdict(p) for p in problems]), "%.6g")


@dataclass(frozen=True)
class Curve:
    """Accuracy (fractions) against completion tokens per problem at each K, from the aggregate stage."""

    label: str
    tokens: list[float]
    accuracy: list[float]
    colour: str
    style: str


def plot_accuracy_vs_tokens(curves: Sequence[Curve], live: dict[str, LiveMethod], path: Path, *, dataset: str,
                            simulated: bool) -> None:
    """The pool's curves (Cons@K, the replayed online methods at each K) and a point per live method, with its
    interval, on completion tokens per problem (log scale)."""
    figure = Figure(figsize=(7.5, 4.8), layout="constrained")
    axis = figure.subplots()
    for curve in curves:
        axis.plot(curve.tokens, [100 * a for a in curve.accuracy], color=curve.colour, linestyle=curve.style,
                  marker=".", label=curve.label)
    for name, method in live.items():
        colour = method_colour(name)
        errors = [[method.accuracy_pct - method.ci_low_pct], [method.ci_high_pct - method.accuracy_pct]]
        axis.errorbar([method.completion_tokens], [method.accuracy_pct], yerr=errors, fmt="*", markersize=14,
                      color=colour, markeredgecolor="black", capsize=4, label=f"live online_{name} (billed tokens)")
    axis.set_xscale("log")
    axis.set_xlabel("completion tokens per problem (log scale)")
    axis.set_ylabel("accuracy (%)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="best")
    axis.set_title(titled(f"{dataset}: live online DeepConf beside the pool's curves", simulated), fontsize=10)
    save_png(figure, path)


def pool_curves(cons: tuple[list[float], list[float]] | None,
                online: dict[str, tuple[list[float], list[float]]]) -> list[Curve]:
    """Cons@K and each replayed online method as curves ((tokens, accuracy) at each K)."""
    curves = []
    if cons is not None:
        label, colour, style = BASELINE_STYLES["cons"]
        curves.append(Curve(label, cons[0], cons[1], colour, style))
    for method, (tokens, accuracy) in online.items():
        curves.append(Curve(f"{method} replayed on the pool, at each K", tokens, accuracy,
                            method_colour(method.removeprefix("online_")), ":"))
    return curves


def method_colour(name: str) -> str:
    """One colour per online method name (low, high, ...), the same for its live point and its replayed curve."""
    known = ("low", "high")
    index = known.index(name) if name in known else len(known) + sum(map(ord, name))
    return ONLINE_COLOURS[index % len(ONLINE_COLOURS)]
