"""One problem's traces -> its rows of the score table: answer, correctness, validity, confidences.

The score stage streams the pool one problem at a time (`score_pool`, problems in parallel) and
concatenates these frames; `aggregate` reads only that table, so the gold answer is folded into
`correct` here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tracevote.answers.classes import NO_CODE, answer_classes
from tracevote.answers.extract import box_source, boxed_text, resolve_answer
from tracevote.answers.mathverify import MathJudge
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import MEASURES, TOKEN_SIGNALS, ConfidenceConfig
from tracevote.core.errors import DataError
from tracevote.core.parquet import booleans, numbers, pandas_metadata, repeated, strings
from tracevote.deepconf.confidence import StopProfiles, TraceMeasures, trace_measures
from tracevote.deepconf.signals import SignalPlan, plan_signals, pool_top_width, signal_columns, signal_traces
from tracevote.store.pool import Pool
from tracevote.store.records import ProblemTraces

if TYPE_CHECKING:  # the stage never imports pandas (a second of start-up); tests and tools get frames
    import pandas as pd

KEY_COLUMNS: tuple[str, ...] = ("problem_id", "sample_id", "answer", "answer_source", "correct", "valid",
                                "n_tokens", "finish_reason")
SCORE_COLUMNS: tuple[str, ...] = (*KEY_COLUMNS, *MEASURES)
STOP_COLUMNS: tuple[str, ...] = ("problem_id", "sample_id", "spent", "value")
BYTES_PER_WORKER = 1 << 30  # of pool logs: less does not repay a worker process (paying_workers)
# (arrow type, pandas dtype) of each column: the tables read back through pandas as the frames they were
_TYPES = {"problem_id": (pa.large_string(), "str"), "sample_id": (pa.int64(), "int64"),
          "answer": (pa.int64(), "Int64"), "answer_source": (pa.large_string(), "str"),
          "correct": (pa.bool_(), "bool"), "valid": (pa.bool_(), "bool"), "n_tokens": (pa.int64(), "int64"),
          "finish_reason": (pa.large_string(), "str"), "spent": (pa.int64(), "int64"),
          "value": (pa.float64(), "float64"), **{name: (pa.float64(), "float64") for name in MEASURES},
          **{name: (pa.float64(), "float64") for signal in TOKEN_SIGNALS for name in signal_columns(signal)}}


@functools.cache
def _schema(columns: tuple[str, ...]) -> pa.Schema:
    """The table's schema, made when first written rather than on import: the score table's readers (aggregate, the
    explorer) import this module for its columns and never need it."""
    schema = pa.schema([(name, _TYPES[name][0]) for name in columns])
    return schema.with_metadata(pandas_metadata(schema, {name: _TYPES[name][1] for name in columns}))
# The stop table is the stage's largest output (~0.08 rows a token): pyarrow's defaults (a dictionary tried on
# every column, statistics) took 3x as long to write it as these encodings, and made it 2x larger.
STOP_WRITE_OPTIONS: dict[str, Any] = {
    "use_dictionary": ["problem_id", "sample_id"], "write_statistics": False,
    "column_encoding": {"spent": "DELTA_BINARY_PACKED", "value": "BYTE_STREAM_SPLIT"}}


@dataclass(frozen=True, eq=False)
class ScoredProblem:
    """One problem's rows of the score table and of the stop table, as Arrow tables (score_schema, the stop
    table's)."""

    scores: pa.Table
    stops: pa.Table

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Both tables as pandas frames, as read back from their Parquet files."""
        return self.scores.to_pandas(), self.stops.to_pandas()


def score_schema(extra_columns: tuple[str, ...] = ()) -> pa.Schema:
    """The score table's schema, with a compared signal's columns after it (signals.signal_columns)."""
    return _schema((*SCORE_COLUMNS, *extra_columns))


def score_problem(traces: ProblemTraces, gold: int, cfg: ConfidenceConfig, answers: AnswersConfig) -> pd.DataFrame:
    """The score-table rows of `traces` (see `scored`); the stop rows are not converted."""
    return scored(traces, gold, cfg, answers).scores.to_pandas()


def score_and_stops(traces: ProblemTraces, gold: int, cfg: ConfidenceConfig,
                    answers: AnswersConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`scored` as pandas frames: the score rows and the stop rows."""
    return scored(traces, gold, cfg, answers).frames()


def scored(traces: ProblemTraces, gold: int, cfg: ConfidenceConfig, answers: AnswersConfig,
           others: dict[str, ProblemTraces] | None = None) -> ScoredProblem:
    """One row per trace, columns SCORE_COLUMNS, in the order of `traces`.

    - answer, answer_source: `resolve_answer` of the trace's candidates under `answers` (pandas Int64,
      <NA> for none; source boxed, fallback or none).
    - valid: the trace has an answer and at least one token. An invalid trace casts no vote and
      counts as wrong in Pass@1; it is kept in the table so reports can count it.
    - correct: valid and answer == gold (False for invalid traces).
    - n_tokens: tokens in the trace, including tokens without a confidence.
    - avg, bottom10, lowest, tail: `trace_measures`; NaN when no token has a confidence, even for a
      valid trace (it then votes in Cons@K but not in the confidence-weighted votes).
    `traces.token_confidence` is the per-token signal the measures average (C_i, or the one
    tracevote.deepconf.signals.signal_traces put in its place); each of `others` (signal -> the same traces with
    that signal) adds its measures as columns <signal>_<measure>.
    The second table is the stop table: one row per record low of each trace (columns STOP_COLUMNS,
    tracevote.deepconf.confidence.StopProfiles), which online DeepConf replays. It keeps only the records
    that a threshold between the smallest and the largest `lowest` of these traces can reach
    (StopProfiles.within), so it depends on the traces scored together.
    """
    _check_lengths(traces)
    resolved = [resolve_answer(c, finish, answers) for c, finish in zip(traces.candidates, traces.finish_reasons,
                                                                          strict=True)]
    missing = np.array([value is None for value, _ in resolved], dtype=bool)
    answer = np.array([-1 if value is None else value for value, _ in resolved], dtype=np.int64)
    return _table(traces, cfg, answer, missing, [source for _, source in resolved], answer == gold, others or {})


def scored_math(traces: ProblemTraces, texts: Sequence[str], gold: str, cfg: ConfidenceConfig,
                judge: MathJudge, others: dict[str, ProblemTraces] | None = None) -> ScoredProblem:
    """`scored` of a problem of `answer_format: math`, whose traces' `texts` are in the order of `traces`.

    answer is the code of the trace's answer class (tracevote.answers.classes: the text of its last box,
    Math-Verify-equal texts sharing a code), <NA> for no box; answer_source is boxed or none (a math answer
    is never a last number); correct: valid and the class equals `gold`. The other columns are `scored`'s.
    """
    _check_lengths(traces)
    boxed = [boxed_text(text) for text in texts]
    classes = answer_classes(gold, boxed, judge)
    missing = classes.codes == NO_CODE
    sources = ["none" if text is None else "boxed" for text in boxed]
    return _table(traces, cfg, classes.codes, missing, sources, classes.correct, others or {})


def _table(traces: ProblemTraces, cfg: ConfidenceConfig, answer: np.ndarray, missing: np.ndarray,
           sources: list[str], matches_gold: np.ndarray, others: dict[str, ProblemTraces]) -> ScoredProblem:
    measures = trace_measures(traces, cfg)
    n_tokens = np.diff(np.asarray(traces.offsets)).astype(np.int64)
    valid = ~missing & (n_tokens > 0)
    columns = [
        repeated(traces.problem_id, len(traces)),
        numbers(np.asarray(traces.sample_ids, dtype=np.int64)),
        numbers(answer, missing=missing),
        strings(sources),
        booleans(valid & matches_gold),
        booleans(valid),
        numbers(n_tokens),
        strings(list(traces.finish_reasons)),
        *(numbers(measures.by_name(name)) for name in MEASURES),
    ]
    for other in others.values():
        extra = trace_measures(other, cfg)
        columns += [numbers(extra.by_name(name)) for name in MEASURES]
    schema = score_schema(tuple(name for signal in others for name in signal_columns(signal)))
    return ScoredProblem(pa.Table.from_arrays(columns, schema=schema), _stop_rows(traces, _kept_stops(measures)))


def _kept_stops(measures: TraceMeasures) -> StopProfiles:
    lowest = measures.lowest[np.isfinite(measures.lowest)]
    # a trace with records has a full window, hence a finite lowest: no finite lowest means no records
    return measures.stops.within(lowest.min(), lowest.max()) if len(lowest) else measures.stops


def _stop_rows(traces: ProblemTraces, stops: StopProfiles) -> pa.Table:
    per_trace = np.diff(stops.offsets)
    columns = [repeated(traces.problem_id, len(stops.spent)),
               numbers(np.repeat(np.asarray(traces.sample_ids, dtype=np.int64), per_trace)),
               numbers(stops.spent), numbers(stops.value)]
    return pa.Table.from_arrays(columns, schema=_schema(STOP_COLUMNS))


def score_plan(pool: Pool, problem_ids: Sequence[str], cfg: ConfidenceConfig) -> SignalPlan:
    """The signals the pool is scored on (tracevote.deepconf.signals), from the top-k width of its first problem's
    first sample; refuses (DataError, one line) a configured signal the pool cannot give."""
    stored_k = pool_top_width(pool, problem_ids[0]) if problem_ids else None
    return plan_signals(cfg, stored_k, str(pool.root))


def score_pool(pool: Pool, problems: Sequence[tuple[str, int | str]], n_pool: int, cfg: ConfidenceConfig,
               answers: AnswersConfig, *, workers: int, plan: SignalPlan | None = None) -> Iterator[ScoredProblem]:
    """`scored` of samples 0..n_pool-1 of each (problem id, gold), in the order given, on the signals of `plan`
    (default: `score_plan`'s).

    With workers > 1, problems are read and scored in up to that many processes, as many as pay
    (`paying_workers`); the tables come back in the same order, so the table does not depend on the number of
    workers. Problems with a LaTeX gold (`answer_format: math`) are scored by `scored_math` in this process,
    their Math-Verify comparisons in up to `workers` worker processes.
    """
    plan = plan or score_plan(pool, [problem_id for problem_id, _ in problems], cfg)
    if any(isinstance(gold, str) for _, gold in problems):
        yield from _score_math_pool(pool, problems, n_pool, cfg, plan, workers=workers)
        return
    jobs = [(pool, problem_id, gold, n_pool, cfg, answers, plan) for problem_id, gold in problems]
    workers = paying_workers(pool, [problem_id for problem_id, _ in problems], workers)
    if workers <= 1 or len(jobs) <= 1:
        yield from map(_score_job, jobs)
        return
    # here, not at the top: the score table's readers (aggregate, the explorer) import this module for its columns
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as executor:
        yield from executor.map(_score_job, jobs)


def _score_math_pool(pool: Pool, problems: Sequence[tuple[str, int | str]], n_pool: int, cfg: ConfidenceConfig,
                     plan: SignalPlan, *, workers: int) -> Iterator[ScoredProblem]:
    with MathJudge(max_workers=workers) as judge:
        for problem_id, gold in problems:
            traces = pool.read_problem(problem_id, n_pool)
            signals = signal_traces(pool, traces, plan)
            yield scored_math(signals[plan.token], _texts(pool, problem_id, traces), str(gold), cfg, judge,
                              {signal: signals[signal] for signal in plan.others})


def _texts(pool: Pool, problem_id: str, traces: ProblemTraces) -> list[str]:
    """The texts of `traces`, in their order (the pool stores them; the score fields do not hold them): of a reply
    whose server split its thinking out, the one its box is read from (answers.extract.box_source)."""
    wanted = set(np.asarray(traces.sample_ids).tolist())
    by_id = {sample.sample_id: box_source(sample.text, sample.reasoning) for sample in pool.iter_samples(problem_id)
             if sample.sample_id in wanted}
    return [by_id[sample_id] for sample_id in np.asarray(traces.sample_ids).tolist()]


def paying_workers(pool: Pool, problem_ids: list[str], workers: int) -> int:
    """At most `workers` processes, one per core, one per BYTES_PER_WORKER of the problems' logs.

    A worker costs ~0.1 CPU-s (fork, and the tables pickled back) and the stage scores ~2 GB of logs per
    CPU-s, so below ~1 GB a worker's share does not repay it (30 x 96 traces, 0.44 GB: 1.09 s with one,
    1.18 s with two, median of 2; 30 x 512, 2.3 GB: 1 worker 1.64 CPU-s, 2 workers 1.81 CPU-s).
    """
    size = sum(path.stat().st_size for path in map(pool.log_path, problem_ids) if path.exists())
    return max(1, min(workers, _cores(), size // BYTES_PER_WORKER))


def _cores() -> int:
    """The cores this process may run on (os.sched_getaffinity is Linux's only: elsewhere all the machine's)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _score_job(job: tuple[Pool, str, int, int, ConfidenceConfig, AnswersConfig, SignalPlan]) -> ScoredProblem:
    pool, problem_id, gold, n_pool, cfg, answers, plan = job
    signals = signal_traces(pool, pool.read_problem(problem_id, n_pool), plan)
    return scored(signals[plan.token], gold, cfg, answers, {signal: signals[signal] for signal in plan.others})


def _check_lengths(traces: ProblemTraces) -> None:
    sizes = {"sample_ids": len(traces.sample_ids), "candidates": len(traces.candidates),
             "finish_reasons": len(traces.finish_reasons), "offsets - 1": len(traces.offsets) - 1}
    if len(set(sizes.values())) != 1:
        listing = ", ".join(f"{name} {size}" for name, size in sizes.items())
        raise DataError(f"problem {traces.problem_id}: fields disagree on the number of traces ({listing})")
