"""The aggregate core: score table -> accuracy of every method at every K, and what explains it
(the records are in tracevote.deepconf.results; validity, confidence and AUROC in tracevote.deepconf.sample_stats).

Methods (names used in outputs): `pass1`, `cons`, `<measure>` (weighted vote, e.g. `bottom10`) and
`<measure>_top<η%>` (top-η filter, then weighted vote, e.g. `tail_top90`); rules in tracevote.deepconf.voting.
A valid sample whose measure is NaN (no token had a confidence) votes in Cons@K but casts no weighted
vote for that measure and does not enter its top-η percentile.

Working sets: for problem p (pool of n samples, ordered by sample_id) and K < n, the r-th working set
is the K samples with the smallest keys in row r of `rng.random((cfg.repeat, n))`, in key order,
where rng = default_rng(SeedSequence(cfg.seed, spawn_key=(K, *p.encode("utf-8")))). Each
(problem, K) has its own generator, so results depend neither on the order of problems or rows in
the table nor on which other K are evaluated. K == n uses the whole pool once (deterministic: std 0
when every problem has n samples); K > n is an error. Each draw is K distinct samples (no replacement
within a set), but the repeats are drawn independently, so two repeats can hold the same set: the result
counts the distinct sets actually drawn per problem (WorkingSets), at most min(repeat, C(n, K)).
Accuracy of a repeat is the mean over problems; std is over repeats (ddof 0). Ties follow
cfg.tie_break (tracevote.deepconf.voting); every method also gets its `fractional` accuracy (a t-way tie
holding the gold scores 1/t), so the report can show what the tie rule adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracevote.core.config_deepconf import (
    DEFAULT_SIGNAL,
    MEASURES,
    WHOLE_PERCENT,
    EvalConfig,
    OnlineConfig,
    TieBreak,
    eta_percent,
)
from tracevote.core.errors import ConfigError, DataError
from tracevote.deepconf.online import OnlineSets, OnlineTrace, replay
from tracevote.deepconf.passk import over_problems, problem_pass_at_k
from tracevote.deepconf.results import (
    AggregateResult,
    MethodAccuracy,
    OnlineAccuracy,
    PairedComparison,
    PassAtK,
    ProblemPassAtK,
    ProblemResult,
    TieRate,
    WorkingSets,
)
from tracevote.deepconf.sample_stats import confidence_summaries, signal_aurocs, validity_counts
from tracevote.deepconf.score import KEY_COLUMNS
from tracevote.deepconf.score_columns import ScoreColumns, ScoreTable
from tracevote.deepconf.signals import vote_weights
from tracevote.deepconf.stop_table import StopTable, stop_profiles
from tracevote.deepconf.uncertainty import Interval, bootstrap_rng, intervals, paired, resample_weights
from tracevote.deepconf.voting import Vote, majority_vote, tie_credit, top_etas, weighted_vote
from tracevote.deepconf.working_sets import pool_too_small, working_set_counts, working_sets
from tracevote.store.records import NO_ANSWER

if TYPE_CHECKING:  # a caller may hand a frame; the aggregate stage reads its table with pyarrow alone
    import pandas as pd

# --- one problem's samples, and votes on its working sets -------------------------------------------

@dataclass(frozen=True, eq=False)
class ProblemScores:
    """One problem's samples ordered by sample_id, answers coded densely for voting.

    codes[i] indexes `values` (ascending, so a smaller code is a smaller answer), NO_ANSWER when
    sample i is invalid. `confidence` is NaN for invalid samples, which never vote.
    """

    problem_id: str
    sample_ids: np.ndarray  # int64 [n]
    codes: np.ndarray  # int64 [n]
    values: np.ndarray  # int64 [distinct valid answers]
    gold_code: int  # code of the correct answer; NO_ANSWER when no sample is correct
    correct: np.ndarray  # bool [n]
    valid: np.ndarray  # bool [n]
    confidence: np.ndarray  # float64 [measures, n]: the weight each measure gives a vote (signals.vote_weights)
    n_tokens: np.ndarray  # int64 [n]
    lowest: np.ndarray  # float64 [n]: lowest-group confidence of every sample, valid or not (online DeepConf)
    signal: str = DEFAULT_SIGNAL  # confidence.token: the per-token signal the measures average

    def __len__(self) -> int:
        return len(self.sample_ids)


@dataclass(frozen=True, eq=False)
class SetVotes:
    """Every method's outcome on each of S working sets of one problem; row m is methods[m]."""

    methods: tuple[str, ...]
    prediction: np.ndarray  # int64 [methods, S]: the answer, NO_ANSWER if unanswered (always for pass1)
    correct: np.ndarray  # float64 [methods, S]: 0/1 under the tie rule; for pass1 the fraction of correct samples
    fractional: np.ndarray  # float64 [methods, S]: 1/t for a t-way top tie holding the gold, else 0/1
    answered: np.ndarray  # float64 [methods, S]: 0/1; for pass1 the fraction of valid samples
    tied: np.ndarray  # bool [S]: Cons@K's top count was shared


def method_names(measures: tuple[str, ...], etas: tuple[float, ...]) -> tuple[str, ...]:
    """('pass1', 'cons', 'avg', 'avg_top10', 'avg_top90', ...) for etas (0.1, 0.9)."""
    names = ["pass1", "cons"]
    for measure in measures:
        names.append(measure)
        names.extend(f"{measure}_top{_percent(eta)}" for eta in etas)
    if len(set(names)) != len(names):
        raise ConfigError(f"eval.etas: {list(etas)} name the same method twice ({', '.join(names)})")
    return tuple(names)


def _percent(eta: float) -> int:
    # EvalConfig.validate already refuses such etas; a config built in code skips it
    percent = eta_percent(eta)
    if percent is None:
        raise ConfigError(f"eval.etas: {eta!r} must be {WHOLE_PERCENT}")
    return percent


def vote_sets(problem: ProblemScores, sets: np.ndarray, etas: tuple[float, ...],
              measures: tuple[str, ...] = MEASURES, tie_break: TieBreak = "smallest") -> SetVotes:
    """Vote every method on the working sets `sets` (int [S, K], sample positions in `problem`).

    measures[j] is problem.confidence[j]. This is the core `aggregate` runs for each (problem, K);
    it takes explicit indices so tests can feed the same sets to a plain reference implementation.
    `correct` follows `tie_break`; `fractional` scores every tie 1/t whatever the rule.
    """
    codes = problem.codes[sets]
    cons = majority_vote(codes, tie_break)
    weighted = _weighted_votes(codes, problem.confidence[:len(measures), sets], etas, tie_break)
    n_sets = len(sets)
    predicted = np.concatenate([np.full((1, n_sets), NO_ANSWER), cons.prediction[None],
                                weighted.prediction.reshape(-1, n_sets)])
    answered = (predicted >= 0).astype(np.float64)
    correct = ((predicted == problem.gold_code) & answered.astype(bool)).astype(np.float64)
    fractional = np.concatenate([np.zeros((1, n_sets)), tie_credit(cons, problem.gold_code)[None],
                                 tie_credit(weighted, problem.gold_code).reshape(-1, n_sets)])
    if tie_break == "fractional":
        correct = fractional
    correct[0] = fractional[0] = problem.correct[sets].mean(axis=1)
    answered[0] = problem.valid[sets].mean(axis=1)
    return SetVotes(methods=method_names(measures, etas), prediction=_decode(problem.values, predicted),
                    correct=correct, fractional=fractional, answered=answered, tied=cons.tied)


def _weighted_votes(codes: np.ndarray, weights: np.ndarray, etas: tuple[float, ...], tie_break: TieBreak) -> Vote:
    """Every weighted method's vote in one call, rows in method order: for each measure (weights [measures,
    S, K]) its plain vote, then one per eta of the top-η filter. Votes are row by row, so stacking the
    rows changes no sum's order."""
    n_measures, _, k = weights.shape
    flat = weights.reshape(-1, k)
    kept = [np.where(mask, flat, np.nan).reshape(weights.shape) for mask in top_etas(flat, etas)]
    stacked = np.stack([weights, *kept], axis=1).reshape(-1, k)  # [measures * (1 + etas) * S, K]
    return weighted_vote(np.tile(codes, (n_measures * (1 + len(etas)), 1)), stacked, tie_break)


def _decode(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Answers for answer codes; NO_ANSWER stays NO_ANSWER."""
    if len(values) == 0:
        return np.full(codes.shape, NO_ANSWER, dtype=np.int64)
    return np.where(codes >= 0, values[codes.clip(0)], NO_ANSWER).astype(np.int64)


# --- the score table, split into problems -------------------------------------------------------------

def split_problems(scores: ScoreTable, measures: tuple[str, ...] = MEASURES,
                   signal: str = DEFAULT_SIGNAL) -> list[ProblemScores]:
    """The table's problems ordered by problem_id, each with its samples ordered by sample_id; `confidence` holds
    the weights its measures give a vote (vote_weights of the table's token `signal`)."""
    columns = ScoreColumns.of(scores)
    _check_columns(columns, measures)
    problem_ids = columns.ids("problem_id")
    order = np.lexsort((columns.ints("sample_id"), problem_ids))  # stable: ties keep the table's order
    ordered_ids = problem_ids[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered_ids[1:] != ordered_ids[:-1])))
    ends = [*starts[1:].tolist(), len(order)]
    return [_problem(str(ordered_ids[start]), columns, order[start:end], measures, signal)
            for start, end in zip(starts.tolist(), ends, strict=True)]


def _check_columns(columns: ScoreColumns, measures: tuple[str, ...]) -> None:
    missing = [c for c in dict.fromkeys((*KEY_COLUMNS, *measures, "lowest")) if c not in columns.names]
    if missing:
        raise DataError(f"score table: missing column(s) {', '.join(missing)} "
                        f"(has: {', '.join(map(str, columns.names))})")
    if len(columns) == 0:
        raise DataError("score table: no rows")


def _problem(problem_id: str, columns: ScoreColumns, rows: np.ndarray, measures: tuple[str, ...],
             signal: str) -> ProblemScores:
    """The problem whose rows of the table are `rows` (positions, in sample_id order)."""
    valid = columns.bools("valid")[rows]
    correct = columns.bools("correct")[rows]
    answers = columns.filled_ints("answer", NO_ANSWER)[rows]
    sample_ids = columns.ints("sample_id")[rows]
    n_tokens = columns.ints("n_tokens")[rows]
    _check_problem(problem_id, sample_ids, answers != NO_ANSWER, n_tokens > 0, valid)
    _check_correct(problem_id, answers, valid, correct)
    values, codes = np.unique(answers[valid], return_inverse=True)
    all_codes = np.full(len(rows), NO_ANSWER, dtype=np.int64)
    all_codes[valid] = codes
    gold = np.unique(all_codes[correct])
    confidence = vote_weights(np.stack([columns.floats(measure)[rows] for measure in measures]), signal)
    confidence[:, ~valid] = np.nan
    return ProblemScores(problem_id=problem_id, sample_ids=sample_ids, codes=all_codes,
                         values=values.astype(np.int64), gold_code=int(gold[0]) if len(gold) else NO_ANSWER,
                         correct=correct, valid=valid, confidence=confidence, n_tokens=n_tokens,
                         lowest=columns.floats("lowest")[rows], signal=signal)


def _check_problem(problem_id: str, sample_ids: np.ndarray, has_answer: np.ndarray, has_tokens: np.ndarray,
                   valid: np.ndarray) -> None:
    where = f"score table, problem {problem_id}"
    if len(np.unique(sample_ids)) != len(sample_ids):
        raise DataError(f"{where}: duplicate sample_id")
    wrong = np.flatnonzero(valid != (has_answer & has_tokens))
    if len(wrong):
        raise DataError(f"{where}, sample_id {sample_ids[wrong[0]]}: 'valid' is {bool(valid[wrong[0]])}, "
                        "but valid means an answer and at least one token")


def _check_correct(problem_id: str, answers: np.ndarray, valid: np.ndarray, correct: np.ndarray) -> None:
    """Only valid samples are correct, and correctness is a function of the answer (one gold answer)."""
    right, wrong = set(answers[correct].tolist()), set(answers[valid & ~correct].tolist())
    if np.any(correct & ~valid) or len(right) > 1 or right & wrong:
        raise DataError(f"score table, problem {problem_id}: correctness disagrees with answers "
                        f"(answers marked correct: {sorted(right)}, of which also marked wrong: "
                        f"{sorted(right & wrong)}; correct but invalid: {int(np.sum(correct & ~valid))})")


# --- aggregate --------------------------------------------------------------------------------------

def aggregate(scores: ScoreTable, cfg: EvalConfig, measures: tuple[str, ...] = MEASURES, *,
              online: OnlineConfig | None = None, stops: pd.DataFrame | StopTable | None = None,
              signal: str = DEFAULT_SIGNAL, top_k: int | None = None) -> AggregateResult:
    """Accuracy (mean, std over repeats, bootstrap interval) of every method at every K in cfg.k, with Cons@K
    tie rates, paired comparisons against Cons@K, per-problem results, validity counts, confidence summaries
    and AUROCs. See the module docstring. With `online` and the score stage's stop table `stops`, online
    DeepConf is replayed on the same working sets (tracevote.deepconf.online).

    Reads only the score table (SCORE_COLUMNS of tracevote.deepconf.score); gold answers are in `correct`; `signal`
    is the token signal its measures average at `top_k` (its metadata's, deepconf.signals.table_signal), which sets
    how a vote weighs them; the AUROC table also reads the compared signals' columns <signal>_<measure>.
    """
    columns = ScoreColumns.of(scores)
    problems = split_problems(columns, measures, signal)
    methods = method_names(measures, cfg.etas)
    _check_pool_sizes(problems, cfg.k)
    replayed, traces = None, []  # online DeepConf runs only with a stop table
    if online is not None and stops is not None:
        replayed, traces = online, online_traces(problems, stops)
    accuracy: list[MethodAccuracy] = []
    online_rows: list[OnlineAccuracy] = []
    paired_rows: list[PairedComparison] = []
    ties: list[TieRate] = []
    per_problem: list[ProblemResult] = []
    set_counts: list[WorkingSets] = []
    pass_rows: list[PassAtK] = []
    pass_problems: list[ProblemPassAtK] = []
    for k in cfg.k:
        sets = [working_sets(p.problem_id, len(p), k, cfg) for p in problems]
        set_counts.append(working_set_counts(sets, k))
        votes = [vote_sets(p, s, cfg.etas, measures, cfg.tie_break) for p, s in zip(problems, sets, strict=True)]
        online_now = replayed if replayed is not None and k >= replayed.warmup else None
        replays = ([] if online_now is None
                   else [[replay(t, s, q, online_now, cfg.tie_break) for t, s in zip(traces, sets, strict=True)]
                         for q in online_now.percentiles.values()])
        cube = _correct_cube(votes, replays, cfg.repeat)
        weights = resample_weights(len(problems), cfg.bootstrap, bootstrap_rng(cfg.seed, k))
        spread = intervals(cube, weights, cfg.ci_level)
        accuracy.extend(_accuracy_at_k(votes, k, cfg.repeat, spread))
        if online_now is not None:
            online_rows.extend(_online_at_k(online_now, replays, problems, sets, k, spread, len(methods), cfg.repeat))
        names = (*methods, *(online_now.method_names() if online_now is not None else ()))
        paired_rows.extend(_paired_at_k(names, cube, weights, k, cfg.ci_level))
        tied = np.stack([np.broadcast_to(v.tied, (cfg.repeat,)) for v in votes])
        ties.append(TieRate(k=k, rate=float(tied.mean())))
        per_problem.extend(_problem_results(problems, votes, k, cfg.repeat))
        at_k = [problem_pass_at_k(p.problem_id, p.correct, k) for p in problems]
        pass_problems.extend(at_k)
        pass_rows.append(over_problems(at_k, weights, cfg.ci_level))
    return AggregateResult(
        k=tuple(cfg.k), repeat=cfg.repeat, seed=cfg.seed, tie_break=cfg.tie_break, etas=tuple(cfg.etas),
        measures=tuple(measures),
        methods=methods, accuracy=tuple(accuracy), ties=tuple(ties), validity=validity_counts(columns, measures),
        confidence=confidence_summaries(columns, measures), auroc=signal_aurocs(columns, signal, measures),
        problems=tuple(per_problem), working_sets=tuple(set_counts), bootstrap=cfg.bootstrap,
        ci_level=cfg.ci_level, online=tuple(online_rows),
        online_methods=replayed.method_names() if replayed is not None else (),
        online_warmup=replayed.warmup if replayed is not None else None,
        online_consensus=replayed.consensus if replayed is not None else None,
        paired=tuple(paired_rows), token_signal=signal, top_k=top_k, pass_at_k=tuple(pass_rows),
        pass_at_k_problems=tuple(pass_problems))


def online_traces(problems: list[ProblemScores], stops: pd.DataFrame | StopTable) -> list[OnlineTrace]:
    table = stops if isinstance(stops, StopTable) else StopTable.of_frame(stops)
    return [OnlineTrace(codes=p.codes, gold_code=p.gold_code, lowest=p.lowest, n_tokens=p.n_tokens, signal=p.signal,
                        stops=stop_profiles(table.rows_of(p.problem_id), p.problem_id, p.sample_ids, p.n_tokens))
            for p in problems]


def _correct_cube(votes: list[SetVotes], replays: list[list[OnlineSets]], repeat: int) -> np.ndarray:
    """float64 [methods (offline, then online), problems, repeats]; a whole-pool set fills every repeat."""
    offline = np.stack([np.broadcast_to(v.correct, (len(v.methods), repeat)) for v in votes], axis=1)
    online = [np.stack([np.broadcast_to(r.correct, (repeat,)) for r in method]) for method in replays]
    cube = np.concatenate([offline, np.stack(online)]) if online else offline
    if all(v.correct.shape[1] == 1 for v in votes):  # K equals the pool: one working set per problem
        cube = cube[:, :, :1]
    return cube


def _online_at_k(online: OnlineConfig, replays: list[list[OnlineSets]], problems: list[ProblemScores],
                 sets: list[np.ndarray], k: int, spread: Interval, first_row: int,
                 repeat: int) -> list[OnlineAccuracy]:
    cons_tokens = np.array([p.n_tokens[s].sum(axis=1).mean() for p, s in zip(problems, sets, strict=True)])
    rows = []
    for i, (name, percentile) in enumerate(online.percentiles.items()):
        method = replays[i]
        per_repeat = np.mean([np.broadcast_to(r.correct, (repeat,)) for r in method], axis=0)
        tokens = np.array([r.tokens.mean() for r in method])
        row = first_row + i
        rows.append(OnlineAccuracy(
            method=f"online_{name}", k=k, percentile=float(percentile), mean=float(spread.mean[row]),
            std=float(per_repeat.std()), fractional=float(np.mean([r.fractional.mean() for r in method])),
            ci_low=float(spread.low[row]), ci_high=float(spread.high[row]), tokens=float(tokens.mean()),
            cons_tokens=float(cons_tokens.mean()), savings=float(1 - tokens.sum() / cons_tokens.sum()),
            generated=float(np.mean([r.generated.mean() for r in method])),
            stopped=float(np.mean([r.stopped.mean() for r in method])),
            answered=float(np.mean([r.answered.mean() for r in method]))))
    return rows


def _paired_at_k(names: tuple[str, ...], cube: np.ndarray, weights: np.ndarray, k: int,
                 level: float) -> list[PairedComparison]:
    """Every method but pass1 and cons against cons; names[i] is the method of cube row i."""
    compared = [i for i, name in enumerate(names) if name not in ("pass1", "cons")]
    result = paired(cube[compared], cube[names.index("cons")], weights, level)
    return [PairedComparison(method=names[i], k=k, difference=float(result.difference[j]),
                             ci_low=float(result.low[j]), ci_high=float(result.high[j]),
                             p_value=float(result.p_value[j]))
            for j, i in enumerate(compared)]


def _accuracy_at_k(votes: list[SetVotes], k: int, repeat: int, spread: Interval) -> list[MethodAccuracy]:
    """Mean and std over repeats of the accuracy over problems, and the bootstrap interval; a whole-pool set
    counts for every repeat."""
    methods = votes[0].methods
    correct = np.stack([np.broadcast_to(v.correct, (len(methods), repeat)) for v in votes])
    fractional = np.stack([np.broadcast_to(v.fractional, (len(methods), repeat)) for v in votes])
    by_repeat = correct.mean(axis=0)  # [methods, repeats]
    fractional_mean = fractional.mean(axis=(0, 2))
    return [MethodAccuracy(method=m, k=k, mean=float(by_repeat[i].mean()), std=float(by_repeat[i].std()),
                           fractional=float(fractional_mean[i]), ci_low=float(spread.low[i]),
                           ci_high=float(spread.high[i]))
            for i, m in enumerate(methods)]


def _check_pool_sizes(problems: list[ProblemScores], ks: tuple[int, ...]) -> None:
    """Fail before any work when the largest K exceeds the smallest pool."""
    smallest = min(problems, key=len)
    if max(ks) > len(smallest):
        raise pool_too_small(max(ks), smallest.problem_id, len(smallest))


def _problem_results(problems: list[ProblemScores], votes: list[SetVotes], k: int,
                     repeat: int) -> list[ProblemResult]:
    """Per problem and method: mean correctness over repeats, and the most frequent prediction."""
    results = []
    for problem, vote in zip(problems, votes, strict=True):
        predictions = np.broadcast_to(vote.prediction, (len(vote.methods), repeat))
        modes = majority_vote(predictions).prediction
        for i, method in enumerate(vote.methods):
            results.append(ProblemResult(
                problem_id=problem.problem_id, method=method, k=k, accuracy=float(vote.correct[i].mean()),
                prediction=int(modes[i]) if modes[i] >= 0 else None,
                answered=float(vote.answered[i].mean())))
    return results
