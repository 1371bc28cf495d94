"""The study report of one dataset: every model's methods at each K in one table with dollars per problem, the
frontier of the cheapest way to each accuracy, each model against the reference on the same problems, a plot of
accuracy against dollars, and headline files per (model, method). The computation is tracevote.deepconf.study's.

The debate joins the table as one point of its endpoint when it ran on the dataset; the critique never does: it
scores solutions of steps datasets (ProcessBench, DeltaBench), not answers to the problems the pools answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from tracevote.core.config_endpoints import PricingConfig
from tracevote.core.costs import money
from tracevote.core.errors import DataError
from tracevote.core.mdtext import md_text
from tracevote.core.names import inside
from tracevote.core.simulated import SIMULATED_BANNER
from tracevote.core.study_paths import ModelPaths
from tracevote.deepconf.results import AggregateResult
from tracevote.deepconf.study import ModelDifference, ModelRun, StudyPoint, frontier
from tracevote.deepconf.uncertainty import bootstrap_rng, intervals, resample_weights
from tracevote.report.compare import TraceTokens, tokens_per_trace
from tracevote.report.figures import save_png, titled
from tracevote.report.headline import write_headlines
from tracevote.report.tables import method_label, percent
from tracevote.store.pool import prompt_tokens

CRITIQUE_NOTE = ("The critique does not join: it scores labelled solutions of steps datasets (ProcessBench, "
                 "DeltaBench), not answers to this dataset's problems.")
MODEL_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
DEBATE_STREAM = 0xDB  # the debate interval's resamples, apart from every K's


def load_run(endpoint: str, paths: ModelPaths, pricing: PricingConfig) -> ModelRun:
    """One model's aggregate, score table and pool prompts (study_paths' files for it)."""
    for path in (paths.aggregate, paths.scores, paths.manifest):
        if not path.is_file():
            raise DataError(f"{path}: missing, the study needs {endpoint}'s DeepConf run on {paths.dataset}; run "
                            f"`dvc repro` (or `dvc pull`) for it")
    stored = orjson.loads(paths.aggregate.read_bytes())
    result = AggregateResult.from_json(stored["result"])
    scores = TraceTokens.read(paths.scores)
    prompts = prompt_tokens(paths.manifest, sorted(set(scores.problem_ids)))
    return ModelRun(endpoint, result, tokens_per_trace([scores]), float(np.mean(list(prompts.values()))), pricing,
                    bool(stored["simulated"]))


def check_ks(run: ModelRun, ks: Sequence[int], aggregate: Path) -> None:
    """Every K shown is one the aggregate voted at (it is older than params.yaml's eval.k otherwise)."""
    missing = [k for k in ks if k not in run.result.k]
    if missing:
        raise DataError(f"{aggregate}: no K {missing} (it has {list(run.result.k)}); run `dvc repro` to aggregate "
                        f"at eval.k")


def debate_point(results: Mapping[str, Any], dataset: str, model: str, *, resamples: int, seed: int,
                 level: float) -> StudyPoint | None:
    """The debate on `dataset` (metrics/debate_results.json's problems of it) as one point: accuracy with its
    bootstrap interval over the debated problems, completion tokens and dollars per problem (as its ledger priced
    each call); None when it debated none of them."""
    problems = [p for p in results["problems"] if p["dataset"] == dataset]
    if not problems:
        return None
    correct = np.array([[float(p["correct"]) for p in problems]])[:, :, None]
    weights = resample_weights(len(problems), resamples, bootstrap_rng(seed, DEBATE_STREAM))
    interval = intervals(correct, weights, level)
    return StudyPoint(model, "debate", None, float(interval.mean[0]), float(interval.low[0]), float(interval.high[0]),
                      float(np.mean([p["completion_tokens"] for p in problems])),
                      float(np.mean([p["usd"] for p in problems])), len(problems))


@dataclass(frozen=True)
class DebateJoin:
    point: StudyPoint | None  # None: it did not run on the dataset
    note: str  # whether it joined, and why not
    simulated: bool


def read_debate(path: Path) -> dict[str, Any]:
    """metrics/debate_results.json (score_debate's)."""
    if not path.is_file():
        raise DataError(f"{path}: missing, study.debate is true; run `dvc repro score_debate` (or set study.debate: "
                        f"false)")
    return orjson.loads(path.read_bytes())


def join_debate(results: Mapping[str, Any], dataset: str, debated: Sequence[str], endpoint: str, judge: str,
                agents: int, *, resamples: int, seed: int, level: float) -> DebateJoin:
    """The debate's point on `dataset` when it ran there (`debated`: debate.datasets), as model `endpoint`, or
    `<endpoint>+<judge>` when the judge's endpoint differs; and the note the report prints."""
    if dataset not in debated:
        return DebateJoin(None, f"The debate did not run on {dataset} (debate.datasets {list(debated)}).", False)
    model = endpoint if judge == endpoint else f"{endpoint}+{judge}"
    point = debate_point(results, dataset, model, resamples=resamples, seed=seed, level=level)
    if point is None:
        return DebateJoin(None, f"The debate debated no problem of {dataset} (debate.problems).", False)
    return DebateJoin(point, f"The debate (DyLAN, {agents} agents) joins as model {model}: {point.problems} "
                             f"problems of {dataset}, dollars as its ledger priced each call.",
                      bool(results["simulated"]))


TABLE_COLUMNS = ("model", "method", "label", "k", "problems", "accuracy_pct", "ci_low_pct", "ci_high_pct",
                 "tokens_per_problem", "usd_per_problem", "on_frontier")


def study_table(points: Sequence[StudyPoint]) -> pd.DataFrame:
    """One row per point, columns TABLE_COLUMNS, accuracy in %, with the frontier marked."""
    on = frontier(np.array([p.usd for p in points]), np.array([p.accuracy for p in points]))
    rows = [(p.model, p.method, label(p), p.k, p.problems, percent(p.accuracy), percent(p.ci_low), percent(p.ci_high),
             round(p.tokens, 1), p.usd, bool(flag)) for p, flag in zip(points, on, strict=True)]
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    table["k"] = table["k"].astype("Int64")
    return table


def label(point: StudyPoint) -> str:
    return "Debate (DyLAN)" if point.method == "debate" else method_label(point.method, point.k or 1)


def difference_table(differences: Sequence[ModelDifference]) -> pd.DataFrame:
    rows = [(d.model, d.reference, d.method, method_label(d.method, d.k), d.k, d.problems, percent(d.difference),
             percent(d.ci_low), percent(d.ci_high), round(d.p_value, 4)) for d in differences]
    return pd.DataFrame(rows, columns=["model", "reference", "method", "label", "k", "problems", "difference_pts",
                                       "ci_low_pts", "ci_high_pts", "p_value"])


def render_markdown(table: pd.DataFrame, differences: pd.DataFrame, *, dataset: str, level: float,
                    simulated: bool, notes: Sequence[str]) -> str:
    """The study's page: the table by model, the frontier, then each model against the reference."""
    lines = [f"**{SIMULATED_BANNER}**", ""] if simulated else []
    lines += [f"# Study: {md_text(dataset)}", "",
              f"Accuracy (%) with its {100 * level:.0f}% bootstrap interval over problems, completion tokens and "
              "dollars per problem (each endpoint's pricing, input at the cache-miss price); * marks the frontier, "
              "the cheapest way to each accuracy.", ""]
    lines += [f"- {md_text(note)}" for note in notes] + ([""] if notes else [])
    lines += ["| model | method | problems | accuracy (%) | interval (%) | tokens / problem | $ / problem | |",
              "|---|---|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {md_text(r.model)} | {md_text(r.label)} | {r.problems} | {r.accuracy_pct:.2f} | "
              f"{_interval(r.ci_low_pct, r.ci_high_pct)} | {r.tokens_per_problem:,.0f} | "
              f"{money(r.usd_per_problem)} | {'*' if r.on_frontier else ''} |"
              for r in table.itertuples()]
    frontier_rows = table[table["on_frontier"]].sort_values("usd_per_problem")
    lines += ["", "Frontier, cheapest first: " + "; ".join(
        f"{md_text(r.model)} {md_text(r.label)} {r.accuracy_pct:.2f}% at {money(r.usd_per_problem)}"
        for r in frontier_rows.itertuples())
        + "."]
    if not differences.empty:
        lines += ["", "Each model minus the reference on the problems both ran (points), paired bootstrap over "
                  "problems:", "", "| model | reference | method | problems | difference (pts) | interval (pts) | p |",
                  "|---|---|---|---:|---:|---:|---:|"]
        lines += [f"| {md_text(r.model)} | {md_text(r.reference)} | {md_text(r.label)} | {r.problems} | "
                  f"{r.difference_pts:+.2f} | {_interval(r.ci_low_pts, r.ci_high_pts)} | {r.p_value:.3f} |"
                  for r in differences.itertuples()]
    return "\n".join(lines) + "\n"


def _interval(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None or pd.isna(low) else f"[{low:.2f}, {high:.2f}]"


def plot_accuracy_vs_usd(table: pd.DataFrame, path: Path, *, dataset: str, simulated: bool) -> None:
    """Every model's methods over K as faint lines in the model's colour, each point a dot; the frontier as a black
    step line through its points, each labelled; x is dollars per problem (log)."""
    figure = Figure(figsize=(8.5, 5.6), layout="constrained")
    axis = figure.subplots()
    colours = dict(zip(dict.fromkeys(table["model"]), MODEL_COLOURS, strict=False))
    for (model, _method), rows in table.groupby(["model", "method"], sort=False):
        rows = rows.sort_values("usd_per_problem")
        marker = "*" if rows["method"].iloc[0] == "debate" else "o"
        axis.plot(rows["usd_per_problem"], rows["accuracy_pct"], color=colours.get(model, "gray"), alpha=0.35,
                  linewidth=0.9, marker=marker, markersize=9 if marker == "*" else 3)
    best = table[table["on_frontier"]].sort_values("usd_per_problem")
    axis.step(best["usd_per_problem"], best["accuracy_pct"], where="post", color="black", linewidth=1.6,
              label="frontier: the cheapest way to each accuracy")
    axis.plot(best["usd_per_problem"], best["accuracy_pct"], "o", color="black", markersize=5)
    for r in best.itertuples():
        axis.annotate(f"{r.model} {r.label}", (r.usd_per_problem, r.accuracy_pct), textcoords="offset points",
                      xytext=(4, -10), fontsize=7)
    for model, colour in colours.items():
        axis.plot([], [], color=colour, marker="o", label=model)
    if (table["method"] == "debate").any():
        axis.plot([], [], "*", color="gray", markersize=9, linestyle="none", label="debate (DyLAN)")
    axis.set_xscale("log")
    # ticks at 1, 2 and 5 of each decade over a narrow range; over a wide one their labels would overlap
    usd = table["usd_per_problem"]
    decades = math.log10(float(usd.max()) / float(usd.min())) if float(usd.min()) > 0 else 0.0
    axis.xaxis.set_major_locator(LogLocator(subs=(1.0,) if decades > 1.5 else (1.0, 2.0, 5.0)))
    axis.tick_params(axis="x", labelrotation=20)
    axis.xaxis.set_major_formatter(FuncFormatter(lambda usd, _: money(usd)))
    axis.xaxis.set_minor_formatter(NullFormatter())
    axis.grid(alpha=0.3)
    axis.set_xlabel("dollars per problem (log)")
    axis.set_ylabel("accuracy (%)")
    axis.set_xlim(right=float(table["usd_per_problem"].max()) * 3)  # room for the last frontier point's label
    figure.legend(*axis.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    axis.set_title(titled(f"Accuracy vs dollars per problem, every model's methods over K ({dataset})", simulated),
                   fontsize=10)
    save_png(figure, path)


def headlines(table: pd.DataFrame, differences: pd.DataFrame, k: int, *,
              simulated: bool) -> dict[str, dict[str, dict[str, Any]]]:
    """model -> method -> its headline at K (Pass@1 at 1, the debate at none): the table's figures, and for a model
    other than the reference its difference from it on the same problems ("vs_reference_pts" and interval)."""
    shown = table[(table["k"] == k) | table["method"].isin(["pass1", "debate"])]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in shown.itertuples():
        headline = {"simulated": simulated, "problems": int(r.problems), "k": None if pd.isna(r.k) else int(r.k),
                    "accuracy_pct": float(r.accuracy_pct), "tokens_per_problem": float(r.tokens_per_problem),
                    "usd_per_problem": round(float(r.usd_per_problem), 6), "on_frontier": bool(r.on_frontier)}
        if not pd.isna(r.ci_low_pct):
            headline |= {"ci_low_pct": float(r.ci_low_pct), "ci_high_pct": float(r.ci_high_pct)}
        versus = differences[(differences["model"] == r.model) & (differences["method"] == r.method)
                             & (differences["k"] == (1 if r.method == "pass1" else k))] if not differences.empty \
            else differences
        if not versus.empty:
            row = versus.iloc[0]
            headline |= {"vs_reference_pts": float(row["difference_pts"]),
                         "vs_reference_ci_low_pts": float(row["ci_low_pts"]),
                         "vs_reference_ci_high_pts": float(row["ci_high_pts"])}
        out.setdefault(r.model, {})[r.method] = headline
    return out


def write_model_headlines(folder: Path, by_model: Mapping[str, Mapping[str, dict[str, Any]]]) -> None:
    """`folder/<model>/<method>.json` (write_headlines: stale methods removed); then a model folder of a model the
    study no longer compares is removed, its .json files first, so `dvc metrics show` lists no stale row."""
    for model, methods in by_model.items():
        write_headlines(inside(folder, model), methods)
    kept = {inside(folder, model) for model in by_model}
    for stale in sorted(p for p in folder.iterdir() if p.is_dir() and p not in kept) if folder.is_dir() else ():
        for file in stale.glob("*.json"):
            file.unlink()
        if not any(stale.iterdir()):
            stale.rmdir()
