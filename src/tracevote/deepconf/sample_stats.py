"""What explains the accuracies, from every sample of the pool rather than from working sets:
how many samples could be scored, how each confidence measure is distributed for correct and wrong
answers, and how well it tells them apart (AUROC).
"""

from __future__ import annotations

import numpy as np

from tracevote.answers.extract import ANSWER_SOURCES
from tracevote.core.config_deepconf import DEFAULT_SIGNAL, MEASURES, TOKEN_SIGNALS
from tracevote.deepconf.results import Auroc, ConfidenceSummary, Validity
from tracevote.deepconf.score_columns import ScoreColumns, ScoreTable
from tracevote.deepconf.stop_table import rows_by_code

SUMMARY_PERCENTILES = (10, 50, 90)


def validity_counts(scores: ScoreTable, measures: tuple[str, ...] = MEASURES) -> Validity:
    """Valid samples per problem, and why the others could not be scored (disjoint reasons)."""
    columns = ScoreColumns.of(scores)
    valid = columns.bools("valid")
    has_tokens = columns.ints("n_tokens") > 0
    finish_reason = columns.texts("finish_reason")
    length = finish_reason == "length"
    no_answer = has_tokens & columns.missing("answer")
    problems, problem_of_row = np.unique(columns.ids("problem_id"), return_inverse=True)
    per_problem = np.bincount(problem_of_row[valid], minlength=len(problems))  # ordered by problem id
    unweighted = valid & _any_nan([columns.floats(measure) for measure in measures], len(columns))
    source = columns.texts("answer_source")
    fallback_votes = valid & (source == "fallback")
    return Validity(
        n_problems=len(per_problem), n_samples=len(columns), n_valid=int(valid.sum()),
        valid_per_problem_mean=float(per_problem.mean()), valid_per_problem_min=int(per_problem.min()),
        fewest_valid_problem=str(problems[per_problem.argmin()]),
        no_tokens=int((~has_tokens).sum()), no_answer=int((no_answer & ~length).sum()),
        truncated=int((no_answer & length).sum()), finish_length=int(length.sum()),
        unweighted=int(unweighted.sum()), by_source=_counts(source, ANSWER_SOURCES),
        by_finish_reason=_counts(finish_reason, ("stop", "length")),
        fallback_votes=int(fallback_votes.sum()),
        fallback_votes_correct=int((fallback_votes & columns.bools("correct")).sum()))


def _any_nan(arrays: list[np.ndarray], length: int) -> np.ndarray:
    """bool [length]: NaN in any of `arrays` (a valid sample without some measure is counted as unweighted)."""
    found = np.zeros(length, dtype=bool)
    for values in arrays:
        found |= np.isnan(values)
    return found


def _counts(values: np.ndarray, expected: tuple[str, ...]) -> dict[str, int]:
    """{value: count}, the expected values first (0 when absent), then any others sorted by name."""
    names, counts = np.unique(values, return_counts=True)
    found = dict(zip(names.tolist(), counts.tolist(), strict=True))
    ordered = list(expected) + sorted(set(found) - set(expected))
    return {name: int(found.get(name, 0)) for name in ordered}


def confidence_summaries(scores: ScoreTable,
                         measures: tuple[str, ...] = MEASURES) -> tuple[ConfidenceSummary, ...]:
    """Per measure, mean and p10/p50/p90 of valid samples' finite values, for correct and for wrong."""
    columns = ScoreColumns.of(scores)
    valid = columns.bools("valid")
    correct = columns.bools("correct")
    summaries = []
    for measure in measures:
        values = columns.floats(measure)
        for is_correct in (True, False):
            # sorted, so the float sums do not depend on the order of rows
            chosen = np.sort(values[valid & (correct == is_correct) & np.isfinite(values)])
            summaries.append(_summary(measure, is_correct, chosen))
    return tuple(summaries)


def _summary(measure: str, correct: bool, values: np.ndarray) -> ConfidenceSummary:
    if len(values) == 0:
        return ConfidenceSummary(measure, correct, 0, None, None, None, None)
    p10, p50, p90 = (float(p) for p in np.percentile(values, SUMMARY_PERCENTILES))
    return ConfidenceSummary(measure, correct, len(values), float(values.mean()), p10, p50, p90)


def signal_aurocs(scores: ScoreTable, signal: str, measures: tuple[str, ...] = MEASURES) -> tuple[Auroc, ...]:
    """`measure_aurocs` of the table's own measures (token signal `signal`), then of every compared signal whose
    columns <other>_<measure> the table holds (deepconf.signals), in TOKEN_SIGNALS order."""
    columns = ScoreColumns.of(scores)
    rows = list(measure_aurocs(columns, measures, signal=signal))
    for other in TOKEN_SIGNALS:
        compared = tuple(f"{other}_{measure}" for measure in measures)
        if other != signal and all(column in columns.names for column in compared):
            rows += measure_aurocs(columns, measures, signal=other, value_columns=compared)
    return tuple(rows)


def measure_aurocs(scores: ScoreTable, measures: tuple[str, ...] = MEASURES, *, signal: str = DEFAULT_SIGNAL,
                   value_columns: tuple[str, ...] | None = None) -> tuple[Auroc, ...]:
    """AUROC of each measure for telling correct from wrong valid samples: pooled over all samples,
    and the mean over problems that have both classes (with their number). Measure i's values are read from
    value_columns[i] (default: the measure's own column)."""
    columns = ScoreColumns.of(scores)
    valid = columns.bools("valid")
    correct = columns.bools("correct")
    problem_ids = columns.ids("problem_id")
    results = []
    for measure, column in zip(measures, value_columns or measures, strict=True):
        values = columns.floats(column)
        kept = valid & np.isfinite(values)
        scored, right = values[kept], correct[kept]
        pooled = auroc(scored, right)
        per_problem = [auroc(scored[rows], right[rows]) for rows in _rows_by_problem(problem_ids[kept])]
        defined = [a for a in per_problem if a is not None]
        results.append(Auroc(measure=measure, pooled=pooled, n_problems=len(defined),
                             per_problem_mean=float(np.mean(defined)) if defined else None, signal=signal))
    return tuple(results)


def _rows_by_problem(problem_ids: np.ndarray) -> list[np.ndarray | slice]:
    """Each problem's positions in `problem_ids`, in table order, problems ordered by id."""
    _, problem_of_row = np.unique(problem_ids, return_inverse=True)
    return [rows for _, rows in sorted(rows_by_code(problem_of_row).items())]


def auroc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """P(score of a random positive > score of a random negative), ties counting 1/2 (Mann-Whitney U
    with average ranks); None unless both classes are present.

    >>> auroc(np.array([0.1, 0.4, 0.4, 0.9]), np.array([False, True, False, True]))
    0.875
    """
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    rank_sum = average_ranks(scores)[positive].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, tied values sharing their average rank: [5, 1, 5, 3] -> [3.5, 1, 3.5, 2]."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ends = np.append(starts[1:], len(values))
    tie_rank = (starts + ends + 1) / 2  # mean of ranks start+1 .. end
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(tie_rank, ends - starts)
    return ranks
