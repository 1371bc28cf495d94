"""The headline figures `dvc metrics show`, `metrics diff` and `exp show` read: a few short flat files under one
folder, metrics/headline/, that dvc.yaml declares as its only metrics. A file exists once its stage has run, so the
table lists what has run and warns of nothing missing.

`dvc metrics show` puts every file in one table, a row per file and a column per key of any file. So a file is one
row of a table of methods: DeepConf writes one per method and dataset, and the keys are few and shared wherever the
quantity is the same. Accuracy in percent to two decimals (`accuracy_pct`), tokens as completion tokens per problem
(`tokens_per_problem`), and `simulated` on every file:

    deepconf/<dataset>/<method>.json    {"simulated", "problems", "k", "accuracy_pct", "ci_low_pct", "ci_high_pct",
                                         "tokens_per_problem"}: every method the report ranks at report.k, pass1 at
                                         k 1 (one trace's tokens), cons and each confidence measure's weighted,
                                         top-10% and top-90% votes at report.k (K traces' tokens each)
    deepconf/<dataset>/online_low.json  the same, and "saved_pct": the share of Cons@K's tokens it did not spend
    deepconf/<dataset>/pass_at_k.json   the same keys as a method's, for lm-evaluation-harness's pass@K and avg@K
    deepconf/<dataset>/avg_at_k.json    at report.k (tracevote.deepconf.passk): exact means over every working set
    online_live/<dataset>/online_<m>.json  a live run's method: the same keys (tokens billed), "usd_per_problem", how
                                         its traces ended, and on the same traces of a pool "saved_pct",
                                         "cons_accuracy_pct", "cons_tokens_per_problem", "replay_accuracy_pct",
                                         "replay_tokens_per_problem"; the replay's means over eval.repeat working
                                         sets at K = budget "replay_mean_accuracy_pct",
                                         "replay_mean_tokens_per_problem"
    study/<dataset>/<model>/<method>.json  each model's methods at the study's largest K (report.study): the same
                                         keys, "usd_per_problem", "on_frontier", and for a model other than the
                                         reference "vs_reference_pts", "vs_reference_ci_low_pts",
                                         "vs_reference_ci_high_pts"
    debate.json                         {"simulated", "problems", "accuracy_pct", "tokens_per_problem"}
    critique/<dataset>.json             {"simulated", "solutions", "f1_pct"}
    grading/<run>.json                  {"simulated", "predictions", "accuracy_pct", "words_per_prediction",
                                         "critic_score"}

The interval is the report's bootstrap interval at eval.ci_level (absent with eval.bootstrap 0). Every other figure
(std, paired tests, tie rule, validity, AUROC) is in the flat files beside (summary.json, debate.json,
critique.json, grading.json).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracevote.core.fileio import write_json
from tracevote.core.names import check_inside
from tracevote.critique.metrics import scores
from tracevote.deepconf.results import AggregateResult
from tracevote.report import passk
from tracevote.report.tables import headline_rows, percent

if TYPE_CHECKING:  # annotations only: the report stages that call this module load no debate or critique pool code
    from tracevote.critique.results import CritiqueResult
    from tracevote.debate.results import DebateResult


def deepconf_headlines(result: AggregateResult, k: int, tokens_per_trace: float, *,
                       simulated: bool) -> dict[str, dict[str, Any]]:
    """Every method the report ranks at the report's K, in its order: Pass@1 (one trace), Cons@K, each
    measure's weighted and filtered votes, then each online method, then lm-evaluation-harness's pass@K and avg@K
    (report.passk; K traces each). Voting at K spends K traces' tokens (report.compare's measure); an online method
    what its traces spent before they stopped."""
    common = {"simulated": simulated, "problems": result.validity.n_problems}
    headlines = {}
    for row in headline_rows(result, k):
        spent = 1 if row.method == "pass1" else k
        headlines[row.method] = {**common, "k": spent, **_accuracy(row.mean, row.ci_low, row.ci_high),
                                 "tokens_per_problem": round(spent * tokens_per_trace, 1)}
    for online in (row for row in result.online if row.k == k):
        headlines[online.method] = {**common, "k": k, **_accuracy(online.mean, online.ci_low, online.ci_high),
                                    "tokens_per_problem": round(online.tokens, 1),
                                    "saved_pct": percent(online.savings)}
    exact = result.pass_at_k_at(k)
    for name, (mean, _, low, high) in ({} if exact is None else passk.figures(exact)).items():
        headlines[name] = {**common, "k": k, **_accuracy(mean, low, high),
                           "tokens_per_problem": round(k * tokens_per_trace, 1)}
    return headlines


def live_headlines(live: Mapping[str, Any], comparison: Any, *, problems: int, budget: int,
                   simulated: bool, repeated: Any = None) -> dict[str, dict[str, Any]]:
    """Each live method (report.live.LiveMethod by name) as online_<name>: its accuracy and interval, the
    completion tokens billed per problem, what it cost and how its traces ended; and where a pool holds the same
    traces (report.live.Comparison), the share of Cons@K's tokens it did not spend ("saved_pct", measured), Cons@K's
    and the replay's accuracy and tokens on them; and the replay's means over the aggregate's working sets at
    K = budget (report.live.RepeatedReplay) when there are."""
    headlines = {}
    for name, method in live.items():
        headline = {"simulated": simulated, "problems": problems, "k": budget,
                    "accuracy_pct": round(method.accuracy_pct, 2), "ci_low_pct": round(method.ci_low_pct, 2),
                    "ci_high_pct": round(method.ci_high_pct, 2),
                    "tokens_per_problem": round(method.completion_tokens, 1),
                    "usd_per_problem": round(method.usd, 6), "traces_started": method.traces_started,
                    "traces_stopped": method.traces_stopped, "traces_cancelled": method.traces_cancelled,
                    "started_before_decision": method.started_before_decision}
        if comparison is not None:
            headline |= {"saved_pct": round(comparison.saving_vs_cons_pct[name], 2),
                         "cons_accuracy_pct": round(comparison.cons_accuracy_pct, 2),
                         "replay_accuracy_pct": round(comparison.replay_accuracy_pct[name], 2),
                         "cons_tokens_per_problem": round(comparison.cons_tokens, 1),
                         "replay_tokens_per_problem": round(comparison.replay_tokens[name], 1)}
        if repeated is not None:
            headline |= {"replay_mean_accuracy_pct": round(repeated.accuracy_pct[name], 2),
                         "replay_mean_tokens_per_problem": round(repeated.tokens[name], 1)}
        headlines[f"online_{name}"] = headline
    return headlines


def _accuracy(mean: float, low: float | None, high: float | None) -> dict[str, float | None]:
    """accuracy_pct, and its interval when the report has one."""
    interval = {} if low is None or high is None else {"ci_low_pct": percent(low), "ci_high_pct": percent(high)}
    return {"accuracy_pct": percent(mean), **interval}


def debate_headline(results: Sequence[DebateResult], *, simulated: bool) -> dict[str, Any]:
    """Every debated problem of every dataset: accuracy, and the completion tokens of every call per problem."""
    count = len(results)
    return {"simulated": simulated, "problems": count,
            "accuracy_pct": percent(sum(r.correct for r in results) / count) if count else None,
            "tokens_per_problem": round(sum(r.completion_tokens for r in results) / count, 1) if count else None}


def critique_headlines(results: Sequence[CritiqueResult], *, simulated: bool) -> dict[str, dict[str, Any]]:
    """Per dataset: its solutions and ProcessBench's F1 in percent (None when a subset is empty)."""
    headlines = {}
    for dataset in dict.fromkeys(result.dataset for result in results):
        own = scores([result.scored() for result in results if result.dataset == dataset])
        headlines[dataset] = {"simulated": simulated, "solutions": own.n_error + own.n_correct,
                              "f1_pct": percent(own.f1)}
    return headlines


def grading_headlines(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run (a grade stage's record): its Math-Verify accuracy, the reasoning's words per prediction and the
    critic's mean score (1-5, None when it scored nothing)."""
    return {record["run"]: {"simulated": bool(record["simulated"]), "predictions": record["total"],
                            "accuracy_pct": percent(record["accuracy"]),
                            "words_per_prediction": round(float(record["avg_word_count"]), 1),
                            "critic_score": None if record["critic_score"] is None
                            else round(float(record["critic_score"]), 2)}
            for record in records}


def write_headlines(folder: Path, headlines: Mapping[str, dict[str, Any]]) -> None:
    """`folder/<name>.json` for each of `headlines` (checked dataset and run names), each written atomically;
    then any other .json there (a dataset or run since dropped from params.yaml) is removed, so the table shows
    no stale row. A failed run removes nothing. The names reach here from files (a run record's `run`, an
    aggregate's methods): one whose file would lie outside `folder` is a DataError before anything is written."""
    paths = {name: folder / f"{name}.json" for name in headlines}
    for path in paths.values():
        check_inside(folder, path)
    for name, headline in headlines.items():
        write_json(paths[name], headline)
    for stale in sorted(folder.glob("*.json")):
        if stale.stem not in headlines:
            stale.unlink()
