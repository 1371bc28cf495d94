"""One problem's traces -> its rows of the score table: answer, correctness, validity, confidences.

The score stage streams the pool one problem at a time (`score_pool`, problems in parallel) and
concatenates these frames; `aggregate` reads only that table, so the gold answer is folded into
`correct` here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from tracevote.answers.extract import resolve_answer
from tracevote.core.config import MEASURES, AnswersConfig, ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.deepconf.confidence import StopProfiles, trace_measures
from tracevote.store.pool import Pool
from tracevote.store.records import ProblemTraces

KEY_COLUMNS: tuple[str, ...] = ("problem_id", "sample_id", "answer", "answer_source", "correct", "valid",
                                "n_tokens", "finish_reason")
SCORE_COLUMNS: tuple[str, ...] = (*KEY_COLUMNS, *MEASURES)
STOP_COLUMNS: tuple[str, ...] = ("problem_id", "sample_id", "spent", "value")


def score_problem(traces: ProblemTraces, gold: int, cfg: ConfidenceConfig, answers: AnswersConfig) -> pd.DataFrame:
    """The score-table rows of `traces` (see `score_and_stops`)."""
    return score_and_stops(traces, gold, cfg, answers)[0]


def score_and_stops(traces: ProblemTraces, gold: int, cfg: ConfidenceConfig,
                    answers: AnswersConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per trace, columns SCORE_COLUMNS, in the order of `traces`.

    - answer, answer_source: `resolve_answer` of the trace's candidates under `answers` (pandas Int64,
      <NA> for none; source boxed, fallback or none).
    - valid: the trace has an answer and at least one token. An invalid trace casts no vote and
      counts as wrong in Pass@1; it is kept in the table so reports can count it.
    - correct: valid and answer == gold (False for invalid traces).
    - n_tokens: tokens in the trace, including tokens without a confidence.
    - avg, bottom10, lowest, tail: `trace_measures`; NaN when no token has a confidence, even for a
      valid trace (it then votes in Cons@K but not in the confidence-weighted votes).
    The second table is the stop table: one row per record low of each trace (columns STOP_COLUMNS,
    tracevote.deepconf.confidence.StopProfiles), which online DeepConf replays. It keeps only the records
    that a threshold between the smallest and the largest `lowest` of these traces can reach
    (StopProfiles.within), so it depends on the traces scored together.
    """
    _check_lengths(traces)
    measures = trace_measures(traces, cfg)
    resolved = [resolve_answer(c, finish, answers) for c, finish in zip(traces.candidates, traces.finish_reasons,
                                                                          strict=True)]
    answer = pd.array([value for value, _ in resolved], dtype="Int64")
    n_tokens = np.diff(np.asarray(traces.offsets)).astype(np.int64)
    valid = ~answer.isna() & (n_tokens > 0)
    correct = valid & (answer == gold).fillna(False).to_numpy(dtype=bool)
    columns = {
        "problem_id": pd.Series([traces.problem_id] * len(traces), dtype=str),
        "sample_id": np.asarray(traces.sample_ids, dtype=np.int64),
        "answer": answer,
        "answer_source": pd.Series([source for _, source in resolved], dtype=str),
        "correct": correct,
        "valid": valid,
        "n_tokens": n_tokens,
        "finish_reason": pd.Series(list(traces.finish_reasons), dtype=str),
    }
    columns.update({name: measures.by_name(name) for name in MEASURES})
    lowest = measures.lowest[np.isfinite(measures.lowest)]
    # a trace with records has a full window, hence a finite lowest: no finite lowest means no records
    stops = measures.stops.within(lowest.min(), lowest.max()) if len(lowest) else measures.stops
    return pd.DataFrame(columns, columns=list(SCORE_COLUMNS)), _stop_rows(traces, stops)


def _stop_rows(traces: ProblemTraces, stops: StopProfiles) -> pd.DataFrame:
    per_trace = np.diff(stops.offsets)
    return pd.DataFrame({
        "problem_id": pd.Series([traces.problem_id] * len(stops.spent), dtype=str),
        "sample_id": np.repeat(np.asarray(traces.sample_ids, dtype=np.int64), per_trace),
        "spent": stops.spent,
        "value": stops.value,
    }, columns=list(STOP_COLUMNS))


def score_pool(pool: Pool, problems: Sequence[tuple[str, int]], n_pool: int, cfg: ConfidenceConfig,
               answers: AnswersConfig, *, workers: int) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """`score_and_stops` of samples 0..n_pool-1 of each (problem id, gold), in the order given.

    With workers > 1, problems are read and scored in that many processes; the frames come back in
    the same order, so the table does not depend on the number of workers.
    """
    jobs = [(pool, problem_id, gold, n_pool, cfg, answers) for problem_id, gold in problems]
    if workers <= 1 or len(jobs) <= 1:
        yield from map(_score_job, jobs)
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as executor:
        yield from executor.map(_score_job, jobs)


def _score_job(job: tuple[Pool, str, int, int, ConfidenceConfig, AnswersConfig]) -> tuple[pd.DataFrame, pd.DataFrame]:
    pool, problem_id, gold, n_pool, cfg, answers = job
    return score_and_stops(pool.read_problem(problem_id, n_pool), gold, cfg, answers)


def _check_lengths(traces: ProblemTraces) -> None:
    sizes = {"sample_ids": len(traces.sample_ids), "candidates": len(traces.candidates),
             "finish_reasons": len(traces.finish_reasons), "offsets - 1": len(traces.offsets) - 1}
    if len(set(sizes.values())) != 1:
        listing = ", ".join(f"{name} {size}" for name, size in sizes.items())
        raise DataError(f"problem {traces.problem_id}: fields disagree on the number of traces ({listing})")
