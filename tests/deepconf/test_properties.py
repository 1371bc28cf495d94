"""Vectorized code against plain references written the way the official deepconf code is:
Python lists, one trace or one working set at a time."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from unittest import mock

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tracevote.answers.extract import answer_candidates
from tracevote.core.config_deepconf import MEASURES, ConfidenceConfig, EvalConfig
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.evaluate import aggregate, method_names, split_problems, vote_sets, working_sets
from tracevote.deepconf.score import SCORE_COLUMNS
from tracevote.store.logprobs import token_confidence
from tracevote.store.records import ProblemTraces

NO_BOX = answer_candidates("")
NAN = float("nan")
SETTINGS = settings(max_examples=150, deadline=None)


# --- references -------------------------------------------------------------------------------------

def reference_token_confidence(top: list[float], chosen: float) -> float:
    present = [v for v in top if math.isfinite(v) and v > -9999]
    if present:
        return -sum(present) / len(present)
    return -chosen if math.isfinite(chosen) and chosen > -9999 else NAN


def reference_measures(confs: list[float], group_size: int, fraction: float, tail: int) -> list[float]:
    confs = [c for c in confs if not math.isnan(c)]
    if not confs:
        return [NAN] * 4
    if len(confs) < group_size:
        groups = [sum(confs) / len(confs)]
    else:
        groups = [sum(confs[i:i + group_size]) / group_size for i in range(len(confs) - group_size + 1)]
    n_bottom = max(1, int(len(groups) * fraction))
    last = confs[-tail:]
    return [sum(confs) / len(confs), sum(sorted(groups)[:n_bottom]) / n_bottom, min(groups),
            sum(last) / len(last)]


def reference_weighted(answers: list[int | None], weights: list[float]) -> int | None:
    totals: dict[int, float] = defaultdict(float)
    for answer, weight in zip(answers, weights, strict=True):
        if answer is not None and not math.isnan(weight):
            totals[answer] += weight
    if not totals:
        return None
    best = max(totals.values())
    return min(a for a, total in totals.items() if total == best)


def reference_votes(rows: list[tuple], working_set: list[int], etas: tuple[float, ...]) -> list:
    """[pass1 fraction, cons, avg, avg_top.., ...] predictions for one working set of (answer, correct, conf)."""
    chosen = [rows[i] for i in working_set]
    results: list = [sum(correct for _, correct, _ in chosen) / len(chosen)]
    counts = Counter(a for a, _, _ in chosen if a is not None)
    results.append(min(a for a, c in counts.items() if c == max(counts.values())) if counts else None)
    answers = [a for a, _, _ in chosen]
    for j in range(len(MEASURES)):
        weights = [conf[j] if a is not None else NAN for a, _, conf in chosen]
        results.append(reference_weighted(answers, weights))
        for eta in etas:
            present = [w for w in weights if not math.isnan(w)]
            cutoff = np.percentile(present, 100 * (1 - eta)) if present else NAN
            kept = [w if not math.isnan(w) and w >= cutoff else NAN for w in weights]
            results.append(reference_weighted(answers, kept))
    return results


# --- strategies -------------------------------------------------------------------------------------

confidences = st.one_of(st.floats(0.0, 20.0), st.just(NAN), st.sampled_from([0.001, 1.0, 1.5]))
traces = st.lists(st.lists(confidences, max_size=40), min_size=1, max_size=8)
configs = st.builds(ConfidenceConfig, group_size=st.integers(1, 12),
                    bottom_fraction=st.one_of(st.sampled_from([0.1, 0.5, 1.0]), st.floats(0.01, 1.0)),
                    tail_tokens=st.integers(1, 15))
answers = st.sampled_from([None, 0, 1, 2, 3, 998])
weights = st.sampled_from([0.5, 1.0, 1.5, 2.0, 2.5, NAN]) | st.floats(0.0, 5.0)
samples = st.tuples(answers, st.tuples(weights, weights, weights, weights))


@st.composite
def problems_and_sets(draw: st.DrawFn) -> tuple[list[tuple], int, list[list[int]]]:
    pool = draw(st.lists(samples, min_size=1, max_size=12))
    gold = draw(st.sampled_from([0, 1, 2, 998]))
    k = draw(st.integers(1, len(pool)))
    sets = draw(st.lists(st.permutations(range(len(pool))).map(lambda p: list(p[:k])), min_size=1, max_size=5))
    return pool, gold, sets


def score_table(pools: dict[str, list[tuple]], golds: dict[str, int]) -> pd.DataFrame:
    records = []
    for problem_id, pool in pools.items():
        for sample_id, (answer, conf) in enumerate(pool):
            valid = answer is not None
            records.append({"problem_id": problem_id, "sample_id": sample_id, "answer": answer, "valid": valid,
                            "correct": valid and answer == golds[problem_id], "n_tokens": 5,
                            "finish_reason": "stop", **dict(zip(MEASURES, conf, strict=True))})
    frame = pd.DataFrame(records, columns=list(SCORE_COLUMNS))
    frame["answer"] = frame["answer"].astype("Int64")
    return frame


# --- properties -------------------------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.tuples(st.lists(st.floats(-30, 0) | st.just(NAN) | st.just(-9999.0), max_size=5),
                          st.floats(-30, 0) | st.just(NAN) | st.just(-9999.0)), min_size=1, max_size=20))
def test_token_confidence_matches_reference(tokens: list[tuple[list[float], float]]) -> None:
    width = max(len(top) for top, _ in tokens)
    top = np.full((len(tokens), width), NAN)
    for i, (row, _) in enumerate(tokens):
        top[i, :len(row)] = row
    chosen = np.array([c for _, c in tokens])
    expected = [reference_token_confidence(list(top[i]), chosen[i]) for i in range(len(tokens))]
    np.testing.assert_allclose(token_confidence(top, chosen), expected, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(traces, configs, st.sampled_from([1, 7, 32, 1 << 17]))
def test_trace_measures_match_reference(confs: list[list[float]], cfg: ConfidenceConfig, block: int) -> None:
    offsets = np.concatenate(([0], np.cumsum([len(c) for c in confs]))).astype(np.int64)
    problem = ProblemTraces("p", np.arange(len(confs)), [NO_BOX] * len(confs), ["stop"] * len(confs), offsets,
                            np.array([v for c in confs for v in c], dtype=np.float64))
    # small blocks split the traces into several blocks, as a real pool does
    with mock.patch("tracevote.deepconf.confidence._BLOCK_TOKENS", block):
        got = trace_measures(problem, cfg)
    for j, trace in enumerate(confs):
        expected = reference_measures(trace, cfg.group_size, cfg.bottom_fraction, cfg.tail_tokens)
        actual = [got.avg[j], got.bottom10[j], got.lowest[j], got.tail[j]]
        np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-12)


@SETTINGS
@given(problems_and_sets(), st.sampled_from([(0.1, 0.9), (0.5,), (0.25, 1.0)]))
def test_vote_sets_match_reference(case: tuple, etas: tuple[float, ...]) -> None:
    pool, gold, sets = case
    problem = split_problems(score_table({"p": pool}, {"p": gold}))[0]
    votes = vote_sets(problem, np.array(sets), etas)
    rows = [(a, a is not None and a == gold, conf) for a, conf in pool]
    for s, working_set in enumerate(sets):
        expected = reference_votes(rows, working_set, etas)
        assert votes.correct[0, s] == expected[0]
        predicted = [None if p < 0 else int(p) for p in votes.prediction[1:, s]]
        assert predicted == expected[1:]
        assert votes.correct[1:, s].tolist() == [float(p is not None and p == gold) for p in expected[1:]]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(samples, min_size=4, max_size=10), min_size=1, max_size=3),
       st.sampled_from([(1,), (2, 4), (1, 3, 4)]))
def test_aggregate_matches_reference(pools: list[list[tuple]], ks: tuple[int, ...]) -> None:
    named = {f"q{i}": pool for i, pool in enumerate(pools)}
    golds = dict.fromkeys(named, 1)
    cfg = EvalConfig(k=ks, repeat=6, seed=11, etas=(0.1, 0.9))
    result = aggregate(score_table(named, golds), cfg)
    methods = method_names(MEASURES, cfg.etas)
    for k in ks:
        per_repeat = np.zeros((len(methods), cfg.repeat))
        for problem_id, pool in named.items():
            rows = [(a, a == 1, conf) for a, conf in pool]
            sets = working_sets(problem_id, len(pool), k, cfg)
            for r in range(cfg.repeat):
                expected = reference_votes(rows, list(sets[r % len(sets)]), cfg.etas)
                per_repeat[:, r] += [expected[0], *(float(p == 1) for p in expected[1:])]
        per_repeat /= len(named)
        for i, method in enumerate(methods):
            row = result.accuracy_at(method, k)
            assert math.isclose(row.mean, per_repeat[i].mean(), rel_tol=1e-12, abs_tol=1e-12)
            assert math.isclose(row.std, per_repeat[i].std(), rel_tol=1e-9, abs_tol=1e-12)
