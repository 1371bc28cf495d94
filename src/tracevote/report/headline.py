"""The headline figures `dvc metrics show`, `metrics diff` and `exp show` read: one short flat file per method and
dataset (a grading run for grading), every one under one folder, metrics/headline/, that dvc.yaml declares as its
only metrics. A file exists once its stage has run, so the table lists what has run and warns of nothing missing.

The keys are few and shared between methods where the quantity is the same, so the table has few columns:
accuracy in percent to two decimals (`accuracy_pct`; for DeepConf one per method, `pass1_pct`, `cons_pct`,
`online_low_pct`), tokens as completion tokens per problem (`tokens_per_problem`), and `simulated` on every file.

    deepconf/aime_2025.json  {"simulated": false, "problems": 30, "k": 64, "pass1_pct": 40.1, "cons_pct": 53.33,
                              "cons_tokens_per_problem": 812345.0, "online_low_pct": 56.67,
                              "online_low_saved_pct": 61.2, ...}
    debate.json              {"simulated": false, "problems": 60, "accuracy_pct": 41.67,
                              "tokens_per_problem": 23456.7, "calls_per_problem": 6.1, "usd_per_problem": 0.021}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracevote.core.fileio import write_json
from tracevote.critique.metrics import scores
from tracevote.critique.results import CritiqueResult
from tracevote.debate.results import DebateResult
from tracevote.deepconf.results import AggregateResult
from tracevote.report.tables import unsigned_zero


def percent(share: float | None) -> float | None:
    """0.456789 -> 45.68; None (a share of nothing) stays None."""
    return None if share is None else unsigned_zero(100 * share, 2)


def deepconf_headline(result: AggregateResult, k: int, *, simulated: bool) -> dict[str, Any]:
    """Pass@1 and Cons@K at the report's K, and each online method there: its accuracy and the share of Cons@K's
    tokens it saved (the offline filtered methods are many: summary.json and results.md list them all)."""
    headline: dict[str, Any] = {"simulated": simulated, "problems": result.validity.n_problems, "k": k,
                                "pass1_pct": percent(result.accuracy_at("pass1", k).mean),
                                "cons_pct": percent(result.accuracy_at("cons", k).mean)}
    for online in (row for row in result.online if row.k == k):
        headline["cons_tokens_per_problem"] = round(online.cons_tokens, 1)
        headline[f"{online.method}_pct"] = percent(online.mean)
        headline[f"{online.method}_saved_pct"] = percent(online.savings)
    return headline


def debate_headline(results: Sequence[DebateResult], *, simulated: bool) -> dict[str, Any]:
    """Every debated problem of every dataset: accuracy, and completion tokens, calls and dollars per problem."""
    count = len(results)
    return {"simulated": simulated, "problems": count,
            "accuracy_pct": percent(sum(r.correct for r in results) / count) if count else None,
            "tokens_per_problem": round(sum(r.completion_tokens for r in results) / count, 1) if count else None,
            "calls_per_problem": round(sum(r.calls for r in results) / count, 2) if count else None,
            "usd_per_problem": round(sum(r.usd for r in results) / count, 4) if count else None}


def critique_headlines(results: Sequence[CritiqueResult], *, simulated: bool) -> dict[str, dict[str, Any]]:
    """Per dataset: its solutions and ProcessBench's three scores in percent (None for an empty subset)."""
    headlines = {}
    for dataset in dict.fromkeys(result.dataset for result in results):
        own = scores([result.scored() for result in results if result.dataset == dataset])
        headlines[dataset] = {"simulated": simulated, "solutions": own.n_error + own.n_correct,
                              "f1_pct": percent(own.f1), "error_accuracy_pct": percent(own.error_acc),
                              "correct_accuracy_pct": percent(own.correct_acc)}
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
    no stale row. A failed run removes nothing."""
    for name, headline in headlines.items():
        write_json(folder / f"{name}.json", headline)
    for stale in sorted(folder.glob("*.json")):
        if stale.stem not in headlines:
            stale.unlink()
