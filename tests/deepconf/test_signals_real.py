"""Every token signal on a small real pool, against a computation that does not import tracevote.

tests/fixtures/real_signals holds 10 held-out tinymath problems x 8 traces of the shipped model served by llama.cpp
(not simulated; its README says how it was made). The project imports it, scores it on each token signal and
aggregates at K = 8 (each problem's one working set); `independent` recomputes from the JSON lines alone, with
plain numpy, every measure, within-problem and pooled AUROC, and every weighted and top-eta vote.
"""

from __future__ import annotations

import gzip
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES
from tracevote.core.config import load_params
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig, EvalConfig
from tracevote.datasets.problems import load_problems
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.score import score_pool
from tracevote.sampling.prompts import setting_messages
from tracevote.store.interchange import import_file
from tracevote.store.pool import Pool, Setting

HERE = FIXTURES / "real_signals"
K = 8  # traces per problem: the one working set of each problem
GROUP, TAIL, BOTTOM = 16, 16, 0.1  # the windows `make real` scores its ~50-token traces with
ETAS = (0.1, 0.5, 0.9)
SIGNALS = ("deepconf", "chosen", "entropy")
MEASURES = ("avg", "bottom10", "lowest", "tail")


# --- the independent computation: json and numpy only ---------------------------------------------------------

def records() -> list[dict]:
    with gzip.open(HERE / "tinymath_pool.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def golds() -> dict[str, int]:
    with open(HERE / "problems.jsonl", encoding="utf-8") as lines:
        return {row["id"]: row["answer"] for row in map(json.loads, lines)}


def answer_of(record: dict) -> int | None:
    """The last \\boxed{integer}, else (a finished reply) the last integer."""
    boxes = re.findall(r"\\boxed\{\s*(-?\d+)\s*\}", record["text"])
    if boxes:
        return int(boxes[-1])
    numbers = re.findall(r"-?\d+", record["text"])
    return int(numbers[-1]) if numbers and record["finish_reason"] == "stop" else None


def per_token(record: dict, signal: str) -> list[float]:
    """DeepConf's C_i (stored float32), the chosen logprob, or sum p log p over the top-k; NaN for none."""
    values = []
    for chosen, row in zip(record["token_logprobs"], record["top_logprobs"], strict=True):
        present = [v for v in row if v is not None and v > -9999]
        if signal == "chosen":
            values.append(math.nan if chosen is None else chosen)
        elif signal == "entropy":
            values.append(sum(math.exp(v) * v for v in present) if present else math.nan)
        else:
            mean = sum(present) / len(present) if present else (None if chosen is None else chosen)
            values.append(math.nan if mean is None else float(np.float32(-mean)))
    return values


def measures(values: list[float]) -> dict[str, float]:
    c = [v for v in values if not math.isnan(v)]
    if not c:
        return dict.fromkeys(MEASURES, math.nan)
    width = min(GROUP, len(c))
    groups = sorted(sum(c[i:i + width]) / width for i in range(len(c) - width + 1))
    bottom = max(1, int(len(groups) * BOTTOM))
    return {"avg": sum(c) / len(c), "bottom10": sum(groups[:bottom]) / bottom, "lowest": groups[0],
            "tail": sum(c[-TAIL:]) / len(c[-TAIL:])}


def auroc(scores: list[float], right: list[bool]) -> float | None:
    pos = [s for s, r in zip(scores, right, strict=True) if r]
    neg = [s for s, r in zip(scores, right, strict=True) if not r]
    if not pos or not neg:
        return None
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg) / (len(pos) * len(neg))


def weighted(answers: list[int | None], weights: list[float]) -> int | None:
    totals: dict[int, float] = {}
    for answer, weight in zip(answers, weights, strict=True):
        if answer is not None and not math.isnan(weight):
            totals[answer] = totals.get(answer, 0.0) + weight
    if not totals:
        return None
    best = max(totals.values())
    return min(a for a, total in totals.items() if total == best)  # eval.tie_break smallest


def top_eta(weights: list[float], eta: float) -> list[float]:
    present = [w for w in weights if not math.isnan(w)]
    cutoff = np.percentile(present, 100 * (1 - eta))
    return [w if not math.isnan(w) and w >= cutoff else math.nan for w in weights]


def independent(signal: str) -> tuple[dict[str, tuple[float | None, int, float | None]], dict[str, float]]:
    """Per measure (within-problem mean, its problems, pooled AUROC), and per method its accuracy at K."""
    gold, by_problem = golds(), {}
    for record in records():
        by_problem.setdefault(record["problem_id"], []).append(record)
    rows = []  # (problem, answer, right, measures)
    for problem_id, traces in sorted(by_problem.items()):
        for record in sorted(traces, key=lambda r: r["sample_id"]):
            answer = answer_of(record)
            valid = answer is not None and len(record["tokens"]) > 0
            rows.append((problem_id, answer if valid else None, valid and answer == gold[problem_id],
                         measures(per_token(record, signal))))
    aurocs = {}
    for m in MEASURES:
        kept = [r for r in rows if r[1] is not None and not math.isnan(r[3][m])]
        within = [a for p in sorted(by_problem) if (a := auroc([r[3][m] for r in kept if r[0] == p],
                                                               [r[2] for r in kept if r[0] == p])) is not None]
        aurocs[m] = (sum(within) / len(within) if within else None, len(within),
                     auroc([r[3][m] for r in kept], [r[2] for r in kept]))
    accuracy: dict[str, list[float]] = {}
    for problem_id in sorted(by_problem):
        mine = [r for r in rows if r[0] == problem_id]
        answers = [r[1] for r in mine]
        for m in MEASURES:
            values = [math.nan if r[1] is None else r[3][m] for r in mine]
            w = [v if signal == "deepconf" else math.exp(v) for v in values]  # a log-scale measure weighs e^measure
            for name, kept in [(m, w), *((f"{m}_top{round(100 * e)}", top_eta(w, e)) for e in ETAS)]:
                accuracy.setdefault(name, []).append(float(weighted(answers, kept) == gold[problem_id]))
    return aurocs, {name: float(np.mean(values)) for name, values in accuracy.items()}


# --- the project ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Pool:
    root = tmp_path_factory.mktemp("real_signals")
    problems = load_problems(HERE / "problems.jsonl")
    setting = Setting.from_params(load_params(FIXTURES / "params.yaml"))
    pool = Pool.open_or_create(root / "pools", setting, simulated=False)
    pool.register(setting_messages(problems, setting))
    lines = root / "pool.jsonl"
    with gzip.open(HERE / "tinymath_pool.jsonl.gz", "rb") as packed:
        lines.write_bytes(packed.read())
    import_file(lines, pool, problems, keep_top_logprobs=True, n_pool=K)
    return pool


def project(pool: Pool, signal: str) -> pd.DataFrame:
    cfg = ConfidenceConfig(GROUP, BOTTOM, TAIL, token=signal, compare_signals=True)
    answers = AnswersConfig(fallback="last_integer", truncated_fallback=False)
    problems = [(p.id, p.answer) for p in load_problems(HERE / "problems.jsonl")]
    return pd.concat([s.scores.to_pandas() for s in score_pool(pool, problems, K, cfg, answers, workers=1)])


def test_the_fixture_is_a_real_pool_of_the_size_it_claims() -> None:
    rows = records()
    assert len(rows) == 80 and not any(r.get("simulated") for r in rows)
    assert {len(r["top_logprobs"][0]) for r in rows} == {20}


@pytest.mark.parametrize("signal", SIGNALS)
def test_aurocs_and_votes_match_an_independent_computation(pool: Pool, signal: str) -> None:
    scores = project(pool, signal)
    result = aggregate(scores, EvalConfig(k=(K,), repeat=1, seed=0, etas=ETAS), signal=signal)
    aurocs, accuracy = independent(signal)
    voting = [a for a in result.auroc if a.signal == signal]
    assert len(voting) == 4
    for a in voting:
        within, n, pooled = aurocs[a.measure]
        assert a.n_problems == n
        assert a.per_problem_mean == pytest.approx(within, abs=1e-12)
        assert a.pooled == pytest.approx(pooled, abs=1e-12)
    assert set(accuracy) == set(result.methods) - {"pass1", "cons"}
    for method, expected in accuracy.items():
        assert result.accuracy_at(method, K).mean == expected, method


def test_each_compared_signal_s_aurocs_match_too(pool: Pool) -> None:
    result = aggregate(project(pool, "deepconf"), EvalConfig(k=(K,), repeat=1, seed=0, etas=ETAS))
    assert {a.signal for a in result.auroc} == set(SIGNALS)
    for signal in ("chosen", "entropy"):
        aurocs = independent(signal)[0]
        for a in (a for a in result.auroc if a.signal == signal):
            assert (a.per_problem_mean, a.n_problems) == (pytest.approx(aurocs[a.measure][0], abs=1e-12),
                                                          aurocs[a.measure][1])
            assert a.pooled == pytest.approx(aurocs[a.measure][2], abs=1e-12)


def test_measures_match_within_float_rounding(pool: Pool) -> None:
    """Within float32's rounding: the pool stores C_i as float32, and its sums run in another order."""
    for signal in SIGNALS:
        scores = project(pool, signal).sort_values(["problem_id", "sample_id"])
        expected = [measures(per_token(r, signal)) for r in sorted(records(),
                                                                     key=lambda r: (r["problem_id"], r["sample_id"]))]
        for m in MEASURES:
            assert scores[m].to_numpy() == pytest.approx([e[m] for e in expected], rel=1e-7, abs=1e-12), (signal, m)


def test_the_signals_differ_on_this_pool(pool: Pool) -> None:
    """Not vacuous: the three signals rank the traces differently (the issue's finding on the real model)."""
    scores = project(pool, "deepconf")
    ranks = [scores[column].rank().to_numpy() for column in ("avg", "chosen_avg", "entropy_avg")]
    assert not np.array_equal(ranks[0], ranks[1]) and not np.array_equal(ranks[0], ranks[2])
