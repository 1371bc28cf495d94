"""The simulated model on golds of every answer format: integers (aime, integer), LaTeX text (math, MATH-500's own
answers), and golds it cannot write, which it refuses by name instead of failing later."""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest

from tracevote.answers.mathverify import MathJudge
from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.golds import near_misses, sim_gold
from tracevote.sim.model import SimModel

TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
# MATH-500's own answers (test/precalculus/807, test/intermediate_algebra/1994, test/algebra/2584, 1349, 2036)
MATH_GOLDS = {"Convert the point $(0,3)$ to polar coordinates.": "\\left( 3, \\frac{\\pi}{2} \\right)",
              "Write the sum in terms of $p$ and $q$.": "p - q",
              "What is the value of $f(-2)$?": "\\frac{14}{3}",
              "Who has the greatest average speed?": "\\text{Evelyn}",
              "Find the length of the median.": "3\\sqrt{13}",
              "How many vertical asymptotes?": "2"}
_BOX = re.compile(r"\\boxed\{(.*)\}\Z", re.DOTALL)


def boxed(model: SimModel, problem: str, key: str) -> str | None:
    request = {"model": "deepseek-v4-flash", "temperature": 0.6, "max_tokens": 4096, "logprobs": True,
               "top_logprobs": 5, "messages": [{"role": "user", "content": TEMPLATE.format(problem=problem)}]}
    text = orjson.loads(model.complete_bytes(request, key))["choices"][0]["message"]["content"]
    found = _BOX.search(text)
    return found.group(1) if found else None


@pytest.mark.parametrize(("value", "expected"), [
    (25, 25), (" 042 ", 42), ("-3", -3), ("\\frac{14}{3}", "\\frac{14}{3}"),
    (" \\left( 3, \\frac{\\pi}{2} \\right) ", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("\\frac{1}{2", None), ("x}{", None), ("2π", None), ("a\tb", None)])
def test_golds_are_kept_as_integers_or_text_or_refused_with_a_reason(value, expected) -> None:
    gold, why_not = sim_gold(value)
    assert gold == expected
    assert (why_not is None) == (expected is not None)


@pytest.mark.parametrize("gold", [*list(MATH_GOLDS.values())[:5], "0.5", "x^2 + 1", "\\{1, 2\\}"])
def test_near_misses_are_at_least_four_distinct_wrong_texts_with_balanced_braces(gold: str) -> None:
    misses = near_misses(gold)
    assert len(misses) >= 4 and len(set(misses)) == len(misses) and gold not in misses
    assert all(sim_gold(miss) == (miss, None) for miss in misses)


def test_a_right_trace_boxes_a_latex_gold_as_written() -> None:
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=1.0, mean_tokens=80), MATH_GOLDS)
    answers = {problem: {boxed(model, problem, f"k{i}") for i in range(6)} for problem in MATH_GOLDS}
    # accuracy 1: every trace right, but for the 1% that box nothing
    assert all(answers[problem] - {None} == {gold} for problem, gold in MATH_GOLDS.items()), answers
    assert model.gold_answer(TEMPLATE.format(problem="Convert the point $(0,3)$ to polar coordinates.")) == \
        "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_a_wrong_trace_boxes_latex_that_math_verify_finds_unequal_to_the_gold() -> None:
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.0, mean_tokens=80), MATH_GOLDS)
    pairs = [(gold, answer) for problem, gold in MATH_GOLDS.items() if not gold.isdigit()
             for answer in {boxed(model, problem, f"k{i}") for i in range(8)} - {None}]
    assert len({answer for _, answer in pairs}) >= 10  # several wrong answers per problem, not one
    assert all(answer != gold for gold, answer in pairs)
    with MathJudge(max_workers=1, timeout_s=30.0) as judge:
        verdicts = judge.compare_many(pairs)
    right = [pair for pair, verdict in zip(pairs, verdicts, strict=True) if verdict.equal]
    assert not right, f"'wrong' answers Math-Verify finds right: {right}"


def test_wrong_integer_answers_come_from_the_problems_own_dataset() -> None:
    cfg = SimConfig(seed=0, signal=1.0, accuracy=0.0, mean_tokens=80)
    aime = {f"AIME problem {i}.": 100 + i for i in range(20)}
    gsm8k = {f"GSM8K problem {i}.": 50_000 + i for i in range(20)}
    model = SimModel(cfg, answer_sets=[aime, gsm8k, MATH_GOLDS])
    wrong = [int(answer) for i in range(5) for key in ("a", "b", "c")
             if (answer := boxed(model, f"AIME problem {i}.", key)) is not None]
    assert wrong and all(100 <= answer < 120 for answer in wrong), wrong  # never GSM8K's large numbers


def test_a_gold_it_cannot_write_is_refused_naming_the_problem() -> None:
    with pytest.raises(ValueError, match=r"'Problem X\.'.*unbalanced braces"):
        SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.5, mean_tokens=80), {"Problem X.": "\\frac{1}{2"})


def test_integer_golds_draw_as_before_when_text_golds_join_them() -> None:
    cfg = SimConfig(seed=3, signal=1.0, accuracy=0.45, mean_tokens=80)
    aime = {f"AIME problem {i}.": int(v) for i, v in enumerate(np.random.default_rng(1).integers(0, 1000, 12))}
    alone = SimModel(cfg, aime)
    joined = SimModel(cfg, aime, answer_sets=[MATH_GOLDS])
    request = {"model": "m", "messages": [{"role": "user", "content": TEMPLATE.format(problem="AIME problem 3.")}]}
    assert [alone.complete_bytes(request, str(k)) for k in range(4)] == \
        [joined.complete_bytes(request, str(k)) for k in range(4)]
