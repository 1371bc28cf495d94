"""A live online run's results: per method its accuracy with a bootstrap interval, what it cost, how its traces
ended; beside it Cons@K and the replay on the same traces of a pool, and the saving measured against them.

Every figure is per problem unless named a total. The saving is measured only where a pool of the same setting
holds the live run's traces 0..budget-1 in full: live completion tokens billed against every token of those
traces (Cons@K at K = budget). Without one, the summary says why and prints no saving.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from tracevote.core.csvtext import frame_csv
from tracevote.core.mdtext import md_text
from tracevote.deepconf.live_results import LiveProblem, SameTraces
from tracevote.deepconf.results import AggregateResult
from tracevote.deepconf.uncertainty import bootstrap_rng, intervals, resample_weights
from tracevote.report.figures import TITLE_Y, save_png, set_margins, titled
from tracevote.report.plots import BASELINE_STYLES, ONLINE_COLOURS
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
    closed_after_finish: int  # of the stopped and cancelled, those the server had already finished
    closed_unrecorded: int  # of them, those stored before tracevote recorded whether it had
    started_before_decision: int
    traces_started_per_problem: float
    failed_attempts: int = 0  # stream attempts that broke and were asked again, in all (billed as received)


@dataclass(frozen=True)
class Comparison:
    """Cons@K and the replay on the live run's traces, generated in full by a pool of the same setting."""

    cons_accuracy_pct: float
    cons_tokens: float  # per problem
    replay_accuracy_pct: dict[str, float]
    replay_tokens: dict[str, float]
    saving_vs_cons_pct: dict[str, float]  # 1 - live billed / Cons@K's tokens, measured


@dataclass(frozen=True)
class RepeatedReplay:
    """The aggregate stage's replay at K = budget: means over its eval.repeat working sets (K of the pool's samples
    each, drawn at random), the prediction for a live run on other traces of the same setting."""

    repeat: int
    distinct_sets: int  # the fewest distinct working sets among the problems (1 when K is the whole pool)
    accuracy_pct: dict[str, float]
    ci_low_pct: dict[str, float]
    ci_high_pct: dict[str, float]
    tokens: dict[str, float]  # per problem
    cons_tokens: float  # Cons@K on the same working sets
    saving_vs_cons_pct: dict[str, float]  # predicted


def repeated_replay(result: AggregateResult, *, budget: int, percentiles: dict[str, float], warmup: int,
                    consensus: float | None) -> tuple[RepeatedReplay | None, str | None]:
    """The replay at K = budget under the live run's settings, or none and why (budget not one of eval.k, or the
    aggregate replayed other settings)."""
    if budget not in result.k:
        return None, f"the budget {budget} is not one of eval.k {list(result.k)}"
    if (result.online_warmup, result.online_consensus) != (warmup, consensus):
        return None, (f"the aggregate replayed warmup {result.online_warmup}, consensus {result.online_consensus}; "
                      f"the live run used {warmup}, {consensus}")
    rows = {name: result.online_at(f"online_{name}", budget) for name in percentiles}
    other = [name for name, row in rows.items() if row is None or row.percentile != percentiles[name]]
    if other:
        return None, f"the aggregate did not replay online_{other[0]} at percentile {percentiles[other[0]]}"
    return RepeatedReplay(
        repeat=result.repeat, distinct_sets=result.working_sets_at(budget).fewest,
        accuracy_pct={name: 100 * row.mean for name, row in rows.items()},
        ci_low_pct={name: 100 * row.ci_low for name, row in rows.items()},
        ci_high_pct={name: 100 * row.ci_high for name, row in rows.items()},
        tokens={name: row.tokens for name, row in rows.items()},
        cons_tokens=next(iter(rows.values())).cons_tokens,
        saving_vs_cons_pct={name: 100 * row.savings for name, row in rows.items()}), None


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
        closed_after_finish=sum(p.closed_after_finish for p in rows),
        closed_unrecorded=sum(p.closed_unrecorded for p in rows),
        started_before_decision=sum(p.after_decision for p in rows),
        traces_started_per_problem=sum(p.started for p in rows) / n,
        failed_attempts=sum(p.failed_attempts for p in rows))


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
                 context: dict[str, Any], repeated: RepeatedReplay | None = None,
                 repeated_absent: str | None = None) -> dict[str, Any]:
    """The metrics file: `context` (dataset, model, budget, ...), each live method, the comparison on the same
    traces and the replay's means over the aggregate's working sets, each null with the reason it is missing."""
    return {**context, "live": {name: asdict(method) for name, method in live.items()},
            "same_traces": None if comparison is None else asdict(comparison), "same_traces_absent": absent,
            "replay_working_sets": None if repeated is None else asdict(repeated),
            "replay_working_sets_absent": repeated_absent}


def table_markdown(live: dict[str, LiveMethod], comparison: Comparison | None, absent: str | None, *, budget: int,
                   simulated: bool, repeated: RepeatedReplay | None = None) -> str:
    """The methods side by side: accuracy, tokens and dollars per problem, how the traces ended."""
    head = "SIMULATED model: these figures say the pipeline works, nothing about a real model.\n\n" if simulated else ""
    dollars = "$ / problem (SIMULATED: list prices, nothing spent)" if simulated else "$ / problem"
    lines = [f"| method | accuracy % (interval) | completion tokens / problem | received | kept | {dollars} | "
             "traces started | stopped | cancelled | started before the consensus decision |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, m in live.items():
        lines.append(f"| live {md_text(name)} | {m.accuracy_pct:.1f} ({m.ci_low_pct:.1f}–{m.ci_high_pct:.1f}) | "
                     f"{m.completion_tokens:,.0f} | {m.received_tokens:,.0f} | {m.kept_tokens:,.0f} | "
                     f"{m.usd:.6f} | {m.traces_started} | {m.traces_stopped} | {m.traces_cancelled} | "
                     f"{m.started_before_decision} |")
    if comparison is not None:
        lines.append(f"| {method_label('cons', budget)} on the same traces | {comparison.cons_accuracy_pct:.1f} | "
                     f"{comparison.cons_tokens:,.0f} | | | | | | | |")
        for name in live:
            lines.append(f"| replay {md_text(name)} on the same traces | {comparison.replay_accuracy_pct[name]:.1f} | "
                         f"{comparison.replay_tokens[name]:,.0f} | | | | | | | |")
    if repeated is not None:
        for name in live:
            lines.append(f"| replay {md_text(name)}, mean of {repeated.repeat} working sets of {budget} (at least "
                         f"{repeated.distinct_sets} distinct) | "
                         f"{repeated.accuracy_pct[name]:.1f} ({repeated.ci_low_pct[name]:.1f}–"
                         f"{repeated.ci_high_pct[name]:.1f}) | {repeated.tokens[name]:,.0f} | | | | | | | |")
    notes = ["", "Completion tokens are those billed: the server's usage where it sent one, else the tokens the client "
             "received (counted by the client). Each method's figures include the warmup's traces, as a run of that "
             "method alone would pay them; the methods share one warmup, paid once."]
    for name, m in live.items():
        if m.counted_by_client_pct:
            notes.append(f"live {name}: {m.counted_by_client_pct:.1f}% of its completion tokens were counted by the "
                         f"client; {m.prompt_tokens_unknown} traces' prompt tokens were not reported.")
    notes += [note for name, m in live.items() if (note := stops_after_finish_note(name, m))]
    notes += [f"live {name}: {m.failed_attempts} stream attempts broke after tokens arrived and were asked again "
              f"from the start; the tokens received on them are in the billed tokens and dollars above."
              for name, m in live.items() if m.failed_attempts]
    if comparison is None:
        notes.append(f"No saving is reported: {md_text(absent)}.")
    else:
        notes += [f"live {name} used {comparison.saving_vs_cons_pct[name]:.1f}% fewer completion tokens than "
                  f"{method_label('cons', budget)} on the same traces (measured)." for name in live]
        if any(m.counted_by_client_pct for m in live.values()):
            notes.append(RECEIVED_NOTE)
    return head + "\n".join(lines + notes) + "\n"


# the figure: generated (the simulator's /_stats) against received in docs/live-online.md's benchmark, where the
# simulator is paced like a real server: 4,631 of 301,960 tokens at window 512 (low), 353 of 793,344 at 2048 (high)
RECEIVED_NOTE = ("The saving is counted on billed tokens, which for a stream the client closed are the tokens it "
                 "received: the server generated a few more before it saw the close (0.04-1.5% more than received, "
                 "measured on the simulator paced like a real server: docs/live-online.md), so the saving on the "
                 "server's own count is smaller by up to that much.")


def stops_after_finish_note(name: str, method: LiveMethod) -> str | None:
    """"live low: 9 of 423 stops came after the server had finished the trace ...", or None without a stop."""
    closes = method.traces_stopped + method.traces_cancelled
    if not closes:
        return None
    unrecorded = (f" ({method.closed_unrecorded} of them stored before tracevote recorded it)"
                  if method.closed_unrecorded else "")
    return (f"live {name}: {method.closed_after_finish} of {closes} stops came after the server had finished the "
            f"trace (its finish_reason arrived before the client closed the stream), saving it nothing{unrecorded}.")


def table_csv(live: dict[str, LiveMethod], comparison: Comparison | None, repeated: RepeatedReplay | None, *,
              budget: int, simulated: bool) -> str:
    """live.md's rows as CSV: each live method, then Cons@K and each replay on the same traces, then the replay's
    means over working sets; a figure a row has not is an empty cell."""
    rows: list[dict[str, Any]] = [
        {"row": f"live online_{name}", "accuracy_pct": m.accuracy_pct, "ci_low_pct": m.ci_low_pct,
         "ci_high_pct": m.ci_high_pct, "tokens_per_problem": m.completion_tokens,
         "received_per_problem": m.received_tokens, "kept_per_problem": m.kept_tokens,
         "counted_by_client_pct": m.counted_by_client_pct, "usd_per_problem": m.usd,
         "traces_started": m.traces_started, "traces_stopped": m.traces_stopped,
         "traces_cancelled": m.traces_cancelled, "closed_after_finish": m.closed_after_finish,
         "started_before_decision": m.started_before_decision,
         "saved_vs_cons_pct": None if comparison is None else comparison.saving_vs_cons_pct[name]}
        for name, m in live.items()]
    if comparison is not None:
        rows.append({"row": f"{method_label('cons', budget)} on the same traces",
                     "accuracy_pct": comparison.cons_accuracy_pct, "tokens_per_problem": comparison.cons_tokens})
        rows += [{"row": f"online_{name} replayed on the same traces",
                  "accuracy_pct": comparison.replay_accuracy_pct[name],
                  "tokens_per_problem": comparison.replay_tokens[name]} for name in live]
    if repeated is not None:
        rows += [{"row": f"online_{name} replayed, mean of {repeated.repeat} working sets",
                  "accuracy_pct": repeated.accuracy_pct[name], "ci_low_pct": repeated.ci_low_pct[name],
                  "ci_high_pct": repeated.ci_high_pct[name], "tokens_per_problem": repeated.tokens[name]}
                 for name in live]
    table = pd.DataFrame(rows).reindex(columns=list(rows[0]))
    table["simulated"] = "SIMULATED" if simulated else "real"
    return frame_csv(table, "%.6g")


def problems_csv(problems: Sequence[LiveProblem], *, simulated: bool) -> str:
    """One row per problem and live method; column `simulated` says whether the simulator answered."""
    rows = pd.DataFrame([asdict(p) for p in problems])
    rows["simulated"] = "SIMULATED" if simulated else "real"
    return frame_csv(rows, "%.6g")


@dataclass(frozen=True)
class Curve:
    """Accuracy (fractions) against completion tokens per problem at each K, from the aggregate stage."""

    label: str
    tokens: list[float]
    accuracy: list[float]
    colour: str
    style: str
    ks: tuple[int, ...] = ()  # the K of each point, written beside it (Cons@K's curve)


def plot_accuracy_vs_tokens(curves: Sequence[Curve], live: dict[str, LiveMethod], path: Path, *, dataset: str,
                            simulated: bool, comparison: Comparison | None = None, budget: int = 0,
                            absent: str | None = None) -> None:
    """The pool's curves (Cons@K, the replayed online methods at each K), Cons@K and the replay on the live run's
    own traces (hollow), and a star per live method with its interval, on completion tokens per problem (log)."""
    save_png(accuracy_vs_tokens_figure(curves, live, dataset=dataset, simulated=simulated, comparison=comparison,
                                       budget=budget, absent=absent), path)


def accuracy_vs_tokens_figure(curves: Sequence[Curve], live: dict[str, LiveMethod], *, dataset: str,
                              simulated: bool, comparison: Comparison | None = None, budget: int = 0,
                              absent: str | None = None) -> Figure:
    """plot_accuracy_vs_tokens' figure. Its margins are set for what they hold (the title; the tick labels, the axis
    label and the legend's rows below), sparing constrained layout's extra measuring draw."""
    figure = Figure(figsize=(8, 5.6))
    entries = len(curves) + (1 + len(live) if comparison is not None else 0) + len(live)
    set_margins(figure, (1, 1), left=0.75, right=0.4, top=0.4, bottom=0.7 + 0.2 * -(-entries // 2))
    axis = figure.subplots()
    for curve in curves:
        axis.plot(curve.tokens, [100 * a for a in curve.accuracy], color=curve.colour, linestyle=curve.style,
                  marker=".", linewidth=1.2, alpha=0.8, label=curve.label)
        for k, x, y in zip(curve.ks, curve.tokens, curve.accuracy, strict=False):
            axis.annotate(f"K={k}", (x, 100 * y), textcoords="offset points", xytext=(0, -12), ha="center",
                          fontsize=7, color=curve.colour)
    if comparison is not None:
        axis.plot([comparison.cons_tokens], [comparison.cons_accuracy_pct], "s", markersize=9, fillstyle="none",
                  color=BASELINE_STYLES["cons"][1], markeredgewidth=1.5,
                  label=f"{method_label('cons', budget)} on the live run's traces")
        for name in live:
            axis.plot([comparison.replay_tokens[name]], [comparison.replay_accuracy_pct[name]], "D", markersize=9,
                      fillstyle="none", color=method_colour(name), markeredgewidth=1.5,
                      label=f"online_{name} replayed on the live run's traces")
    for name, method in live.items():
        errors = [[method.accuracy_pct - method.ci_low_pct], [method.ci_high_pct - method.accuracy_pct]]
        axis.errorbar([method.completion_tokens], [method.accuracy_pct], yerr=errors, fmt="*", markersize=14,
                      color=method_colour(name), markeredgecolor="black", capsize=4, elinewidth=1, alpha=0.9,
                      label=f"live online_{name}: billed tokens, interval {method.ci_low_pct:.0f}–"
                            f"{method.ci_high_pct:.0f}%")
    if absent is not None:  # no pool beside the live points: say why rather than leave the reader guessing
        axis.text(0.02, 0.03, textwrap.fill(f"No Cons@K or replay beside the live run: {absent}.", 90),
                  transform=axis.transAxes, fontsize=8, va="bottom")
    axis.set_xscale("log")
    axis.set_xlabel("completion tokens per problem (log scale)")
    axis.set_ylabel("accuracy (%)")
    axis.grid(alpha=0.3, which="both")
    figure.legend(fontsize=8, loc="lower center", ncols=2, frameon=False)
    beside = " beside the pool's curves" if curves else ""
    axis.set_title(titled(f"{dataset}: live online DeepConf{beside}", simulated), fontsize=10, y=TITLE_Y)
    return figure


def pool_curves(cons: tuple[list[float], list[float]] | None,
                online: dict[str, tuple[list[float], list[float]]], ks: Sequence[int] = ()) -> list[Curve]:
    """Cons@K (its K beside each point) and each replayed online method as curves ((tokens, accuracy) at each K,
    means over the aggregate's working sets)."""
    curves = []
    if cons is not None:
        label, colour, style = BASELINE_STYLES["cons"]
        curves.append(Curve(f"{label}, mean of working sets", cons[0], cons[1], colour, style, tuple(ks)))
    for method, (tokens, accuracy) in online.items():
        curves.append(Curve(f"{method} replayed, mean of working sets at each K", tokens, accuracy,
                            method_colour(method.removeprefix("online_")), ":"))
    return curves


def method_colour(name: str) -> str:
    """One colour per online method name (low, high, ...), the same for its live point and its replayed curve."""
    known = ("low", "high")
    index = known.index(name) if name in known else len(known) + sum(map(ord, name))
    return ONLINE_COLOURS[index % len(ONLINE_COLOURS)]
