"""confidence.token / top_k / compare_signals: the per-token signal the measures average, scored from a pool."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import FIXTURES
from tests.store.test_interchange import PROBLEMS, samples_file
from tracevote.core.config import load_params
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import MEASURES, ConfidenceConfig, EvalConfig
from tracevote.core.errors import ConfigError, DataError
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.score import SCORE_COLUMNS, score_pool
from tracevote.deepconf.signals import signal_columns, vote_weights
from tracevote.report.auroc import POOLED, WITHIN
from tracevote.report.tables import render, summary_metrics
from tracevote.sampling.prompts import setting_messages
from tracevote.store.interchange import import_file
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample
from tracevote.store.token_signals import token_signal

ANSWERS = AnswersConfig(fallback="last_integer", truncated_fallback=False)
# window 2, bottom10 the lowest window, tail the last 2 tokens
BASE = ConfidenceConfig(group_size=2, bottom_fraction=0.1, tail_tokens=2)
LN = np.log
# three tokens, top-2 each (best first); the chosen logprobs
TOP = np.array([[LN(0.5), LN(0.25)], [LN(0.9), LN(0.05)], [LN(0.6), LN(0.2)]])
CHOSEN = np.array([LN(0.5), LN(0.05), LN(0.6)])


def test_each_signal_is_its_definition_on_hand_made_tokens() -> None:
    assert token_signal("chosen", CHOSEN, TOP, None) == pytest.approx(CHOSEN)
    assert token_signal("deepconf", CHOSEN, TOP, None) == pytest.approx(-TOP.mean(axis=1))
    assert token_signal("deepconf", CHOSEN, TOP, 1) == pytest.approx(-TOP[:, 0])
    entropy = [0.5 * LN(0.5) + 0.25 * LN(0.25), 0.9 * LN(0.9) + 0.05 * LN(0.05), 0.6 * LN(0.6) + 0.2 * LN(0.2)]
    assert token_signal("entropy", CHOSEN, TOP, None) == pytest.approx(entropy)  # not renormalized
    assert token_signal("entropy", CHOSEN, TOP, 1) == pytest.approx(np.exp(TOP[:, 0]) * TOP[:, 0])


def test_absent_entries_are_skipped_and_a_token_without_any_has_no_signal() -> None:
    top = np.array([[-0.5, np.nan], [np.nan, -9999.0]])
    chosen = np.array([-0.5, -9999.0])
    assert np.isnan(token_signal("entropy", chosen, top, None)[1])
    assert token_signal("entropy", chosen, top, None)[0] == pytest.approx(np.exp(-0.5) * -0.5)
    assert np.isnan(token_signal("chosen", chosen, top, None)[1])
    assert np.isnan(token_signal("deepconf", chosen, top, None)[1])  # no top-k and no chosen logprob


def hand_sample(sample_id: int, answer: str, chosen: np.ndarray, top: np.ndarray | None) -> Sample:
    tokens = [f"t{i} " for i in range(len(chosen) - 1)] + [rf"\boxed{{{answer}}}"]
    return Sample(problem_id="p-1", sample_id=sample_id, text="".join(tokens), tokens=tokens,
                  token_logprobs=chosen.astype(np.float32),
                  top_logprobs=None if top is None else top.astype(np.float32),
                  top_tokens=None, token_confidence=None if top is not None else -chosen.astype(np.float32),
                  answer=None, finish_reason="stop", prompt_tokens=5, completion_tokens=len(chosen), latency_s=0.1)


def hand_pool(tmp_path: Path, *, keep_top: bool = True) -> Pool:
    """p-1 (gold 7): trace 0 the hand-made tokens above answering 7; trace 1 and 2 surer tokens answering 8."""
    setting = Setting.from_params(load_params(FIXTURES / "params.yaml"))
    pool = Pool.open_or_create(tmp_path / "pools", setting, simulated=False)
    pool.register(setting_messages(PROBLEMS, setting))
    sure_top = np.array([[LN(0.95), LN(0.04)]] * 3)
    samples = [hand_sample(0, "7", CHOSEN, TOP), hand_sample(1, "8", np.full(3, LN(0.95)), sure_top),
               hand_sample(2, "8", np.full(3, LN(0.9)), sure_top)]
    import_file(samples_file(tmp_path, samples), pool, PROBLEMS, keep_top_logprobs=keep_top, n_pool=8)
    return pool


def scores_of(pool: Pool, cfg: ConfidenceConfig) -> pd.DataFrame:
    return pd.concat([scored.scores.to_pandas() for scored in score_pool(pool, [("p-1", 7)], 3, cfg, ANSWERS,
                                                                         workers=1)])


@pytest.mark.parametrize(("signal", "top_k"), [("chosen", None), ("entropy", None), ("entropy", 1), ("deepconf", 1)])
def test_the_score_table_measures_average_the_chosen_signal(tmp_path: Path, signal: str, top_k: int | None) -> None:
    scores = scores_of(hand_pool(tmp_path), dataclasses.replace(BASE, token=signal, top_k=top_k))
    values = token_signal(signal, CHOSEN, TOP, top_k)  # from the exact logprobs: the pool holds them quantised
    windows = [(values[0] + values[1]) / 2, (values[1] + values[2]) / 2]
    first = scores.iloc[0]
    tolerance = 5e-3  # the quantised top-k (store.logprobs.top_error_bound: ~0.005 nats 10 nats from the chosen)
    assert first["avg"] == pytest.approx(values.mean(), abs=tolerance)
    assert first["lowest"] == pytest.approx(min(windows), abs=tolerance)
    assert first["bottom10"] == pytest.approx(min(windows), abs=tolerance)
    assert first["tail"] == pytest.approx(windows[1], abs=tolerance)
    assert tuple(scores.columns) == SCORE_COLUMNS  # compare_signals off: the table as before


def test_chosen_is_exact_from_the_stored_logprobs(tmp_path: Path) -> None:
    scores = scores_of(hand_pool(tmp_path), dataclasses.replace(BASE, token="chosen"))
    assert scores.iloc[0]["avg"] == np.mean(CHOSEN.astype(np.float32).astype(np.float64))


def test_deepconf_by_default_is_the_stored_c_i_bit_for_bit(tmp_path: Path) -> None:
    pool = hand_pool(tmp_path)
    today = scores_of(pool, BASE)
    expected = trace_measures(pool.read_problem("p-1", 3), BASE)
    for measure in MEASURES:
        assert np.array_equal(today[measure].to_numpy(), expected.by_name(measure), equal_nan=True)
    for cfg in (dataclasses.replace(BASE, top_k=2), dataclasses.replace(BASE, compare_signals=True)):
        again = scores_of(pool, cfg)
        assert all(np.array_equal(again[m].to_numpy(), today[m].to_numpy()) for m in MEASURES)


def test_compare_signals_adds_each_other_signal_the_pool_supports(tmp_path: Path) -> None:
    pool = hand_pool(tmp_path)
    scores = scores_of(pool, dataclasses.replace(BASE, compare_signals=True))
    assert tuple(scores.columns) == (*SCORE_COLUMNS, *signal_columns("chosen"), *signal_columns("entropy"))
    chosen = scores_of(pool, dataclasses.replace(BASE, token="chosen"))
    assert np.array_equal(scores["chosen_avg"].to_numpy(), chosen["avg"].to_numpy())
    without_top = hand_pool(tmp_path / "confidence-only", keep_top=False)
    scores = scores_of(without_top, dataclasses.replace(BASE, compare_signals=True))
    assert tuple(scores.columns) == (*SCORE_COLUMNS, *signal_columns("chosen"))  # no top-k: no entropy


@pytest.mark.parametrize(("signal", "top_k", "message"), [
    ("entropy", None, r"confidence.token entropy with confidence.top_k null needs the top-k.*keep_top_logprobs"),
    ("deepconf", 1, r"confidence.token deepconf with confidence.top_k 1 needs the top-k"),
])
def test_a_signal_needing_the_top_k_of_a_pool_without_it_is_refused(tmp_path: Path, signal: str, top_k: int | None,
                                                                    message: str) -> None:
    pool = hand_pool(tmp_path, keep_top=False)
    with pytest.raises(DataError, match=message):
        scores_of(pool, dataclasses.replace(BASE, token=signal, top_k=top_k))


def test_a_top_k_above_what_the_pool_keeps_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"confidence.top_k 3 is above the 2 top-k logprobs this pool keeps"):
        scores_of(hand_pool(tmp_path), dataclasses.replace(BASE, token="entropy", top_k=3))


def test_a_vote_weighs_a_log_scale_measure_by_its_exponential() -> None:
    measures = np.array([-0.1, -2.0, np.nan])
    assert vote_weights(measures, "chosen")[:2] == pytest.approx(np.exp(measures[:2]))
    assert vote_weights(measures, "deepconf") is measures


def test_weighted_votes_on_chosen_favour_the_answer_with_more_sure_votes(tmp_path: Path) -> None:
    """Summed as they are, two chosen-logprob measures of -0.1 (answer 8) would lose to one of -0.15 (answer 7)."""
    scores = scores_of(hand_pool(tmp_path), dataclasses.replace(BASE, token="chosen"))
    scores["avg"] = [-0.15, -0.1, -0.1]
    result = aggregate(scores, EvalConfig(k=(3,), repeat=1, seed=0, etas=(0.5,)), signal="chosen")
    assert result.accuracy_at("avg", 3).mean == 0.0  # 8 wins: two votes of e^-0.1 beat one of e^-0.15
    assert result.accuracy_at("avg_top50", 3).mean == 0.0


def test_the_auroc_table_gives_each_signal_within_and_pooled_side_by_side(tmp_path: Path) -> None:
    scores = scores_of(hand_pool(tmp_path), dataclasses.replace(BASE, token="chosen", compare_signals=True))
    result = aggregate(scores, EvalConfig(k=(3,), repeat=1, seed=0, etas=(0.5,)), signal="chosen")
    assert [(a.signal, a.measure) for a in result.auroc] == [
        (signal, measure) for signal in ("chosen", "deepconf", "entropy") for measure in MEASURES]
    text = render(result, 3, simulated=False)
    assert WITHIN in text and POOLED in text and "(confidence.token: chosen, top_k all kept)" in text
    assert "chosen *   avg" in text and "deepconf   avg" in text
    metrics = summary_metrics(result, 3, simulated=False)
    assert metrics["token_signal"] == "chosen"
    assert {"auroc_avg", "auroc_avg_pooled", "auroc_deepconf_avg", "auroc_entropy_tail_pooled"} <= set(metrics)


@pytest.mark.parametrize(("confidence", "pool", "message"), [
    ({"top_k": 25}, {}, "confidence.top_k: 25 must be at most decoding.top_logprobs (20)"),
    ({"token": "entropy"}, {"keep_top_logprobs": False},
     "confidence.token: 'entropy' must be chosen, or deepconf with top_k null: entropy at top_k null needs the top-k"),
    ({"top_k": 5}, {"keep_top_logprobs": False}, "confidence.token: 'deepconf' must be chosen, or deepconf with top_k "
                                                  "null: deepconf at top_k 5 needs the top-k"),
])
def test_params_that_cannot_work_are_refused_in_one_line(tmp_path: Path, confidence: dict, pool: dict,
                                                         message: str) -> None:
    data = yaml.safe_load((FIXTURES / "params.yaml").read_text(encoding="utf-8"))
    data["confidence"].update(confidence)
    data["pool"].update(pool)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_params(path)
    lines = str(error.value).splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_chosen_works_on_a_pool_without_top_k(tmp_path: Path) -> None:
    scores = scores_of(hand_pool(tmp_path, keep_top=False), dataclasses.replace(BASE, token="chosen"))
    assert scores.iloc[0]["avg"] == pytest.approx(CHOSEN.mean(), abs=1e-6)
