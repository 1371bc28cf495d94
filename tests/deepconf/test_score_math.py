"""DeepConf on `answer_format: math`: a pool imported through the real interchange path, scored (answers as classes
of Math-Verify-equal boxed texts), then aggregated by the integer voting unchanged; accuracy checked by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import FIXTURES
from tracevote.core.config import load_params
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig, EvalConfig
from tracevote.datasets.problems import Problem
from tracevote.deepconf.evaluate import aggregate
from tracevote.deepconf.score import score_pool
from tracevote.sampling.prompts import setting_messages
from tracevote.store.interchange import import_file, to_json_line
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample

CFG = ConfidenceConfig(group_size=2, bottom_fraction=0.1, tail_tokens=2)
ANSWERS = AnswersConfig(fallback="last_integer", truncated_fallback=False)
# problem id -> (gold, the boxed answers of its traces in sample order; None: a trace with no box)
TRACES = {
    "half": (r"\frac{1}{2}", [r"\frac{1}{2}", "0.5", "0.4", r"\dfrac12", "2/5", None]),
    "nine": ("9", ["8", "9", "8.0", "9", "8", "7"]),
}
N_POOL = 6
SPLIT = ("nine", 1)  # this trace came from a server with a reasoning parser: its box is in its reasoning alone


def sample(problem_id: str, sample_id: int, boxed: str | None) -> Sample:
    # the last number is 3, not an answer here: a math answer is never a trace's last number
    text = ("The answer is 3." if boxed is None else f"so the answer is $\\boxed{{{boxed}}}$") + " Check: 3"
    tokens = [text[:10], text[10:]]
    reasoning = ""
    if (problem_id, sample_id) == SPLIT:
        reasoning, text = text.split(" Check")[0], " Check: 3"
    confidence = np.array([1.0 + sample_id, 2.0], dtype=np.float32)
    return Sample(problem_id=problem_id, sample_id=sample_id, text=text, tokens=tokens,
                  token_logprobs=np.array([-0.1, -0.2], dtype=np.float32), top_logprobs=None, top_tokens=None,
                  token_confidence=confidence, answer=None, finish_reason="stop", prompt_tokens=10,
                  completion_tokens=2, latency_s=0.5, reasoning=reasoning)


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    folder: Path = tmp_path_factory.mktemp("math_pool")
    source = folder / "samples.jsonl"
    source.write_bytes(b"".join(to_json_line(sample(problem_id, i, boxed), simulated=True)
                                for problem_id, (_, answers) in TRACES.items() for i, boxed in enumerate(answers)))
    pool = Pool.open_or_create(folder / "pools", Setting.from_params(load_params(FIXTURES / "params.yaml")),
                               simulated=True)
    problems = [Problem(problem_id, f"problem {problem_id}", gold) for problem_id, (gold, _) in TRACES.items()]
    pool.register(setting_messages(problems, pool.setting))
    import_file(source, pool, problems, keep_top_logprobs=False, n_pool=None)
    golds = [(problem_id, gold) for problem_id, (gold, _) in TRACES.items()]
    return pd.concat([scored.scores.to_pandas() for scored in score_pool(pool, golds, N_POOL, CFG, ANSWERS,
                                                                          workers=1)], ignore_index=True)


def rows(scores: pd.DataFrame, problem_id: str) -> pd.DataFrame:
    return scores[scores["problem_id"] == problem_id].sort_values("sample_id")


def test_equivalent_answers_share_a_code_in_order_of_first_appearance(scores: pd.DataFrame) -> None:
    half = rows(scores, "half")
    assert half["answer"].tolist() == [0, 0, 1, 0, 1, pd.NA]
    assert half["answer_source"].tolist() == ["boxed"] * 5 + ["none"]
    assert half["correct"].tolist() == [True, True, False, True, False, False]
    assert half["valid"].tolist() == [True] * 5 + [False]
    nine = rows(scores, "nine")
    assert nine["answer"].tolist() == [0, 1, 0, 1, 0, 2]
    assert nine["correct"].tolist() == [False, True, False, True, False, False]


def test_voting_on_codes_gives_the_hand_counted_accuracy(scores: pd.DataFrame) -> None:
    result = aggregate(scores, EvalConfig(k=(N_POOL,), repeat=1, seed=0, etas=(0.9,)))
    # half: 1/2 has 3 votes against 2 for 2/5 -> right; nine: 8 has 3 votes against 2 for 9 -> wrong
    assert result.accuracy_at("cons", N_POOL).mean == pytest.approx(1 / 2)
    # Pass@1: 3 of 6 right on half, 2 of 6 on nine
    assert result.accuracy_at("pass1", N_POOL).mean == pytest.approx((3 / 6 + 2 / 6) / 2)
