"""The held-out tinymath problems against the 24,000 the shipped model was trained on, regenerated without torch
from the seed and count models/tinymath.json records (about 3 s): no problem, solution or arithmetic in common.

"Numbers" of a problem: the numbers its statement writes, in the order written (`numbers_in_order`), or as a
multiset (`numbers_multiset`), distractors included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable

import pytest

from tests.conftest import REPO_ROOT
from tracevote.datasets.tinymath import Problem, training_problems

MANIFEST = REPO_ROOT / "models" / "tinymath.json"
HELDOUT = REPO_ROOT / "src" / "tracevote" / "datasets" / "data" / "tinymath_heldout.jsonl"
# measured: three held-out stories write the same numbers as some training story, in another order and with other
# operations (tinymath-6: 41, 1, 2, 28 and a doubling -> 22; a training story: 41 - 2 + 28, a distractor 1 -> 67)
SAME_MULTISET = {"tinymath-6", "tinymath-59", "tinymath-78"}


def numbers_in_order(text: str) -> tuple[int, ...]:
    """"Ana has 5 pens. Ben has 2 pens. Ana finds 5 more pens." -> (5, 2, 5)"""
    return tuple(int(number) for number in re.findall(r"\d+", text))


def numbers_multiset(text: str) -> tuple[int, ...]:
    """"Ana has 5 pens. Ben has 2 pens. Ana finds 5 more pens." -> (2, 5, 5)"""
    return tuple(sorted(numbers_in_order(text)))


def arithmetic(start: int, lines: list[str]) -> tuple[object, ...]:
    """A solution without its names: (5, "5 - 2 = 3.", "3 * 2 = 6.") for any person and item starting with 5."""
    return (start, *lines)


@pytest.fixture(scope="module")
def training() -> list[Problem]:
    recipe = json.loads(MANIFEST.read_text(encoding="utf-8"))["training"]
    return training_problems(recipe["seed"], recipe["train_problems"])


@pytest.fixture(scope="module")
def heldout() -> list[dict]:
    return [json.loads(line) for line in HELDOUT.read_text(encoding="utf-8").splitlines()]


def test_the_training_set_is_the_manifests(training: list[Problem]) -> None:
    assert len(training) == 24_000
    assert len({problem.problem for problem in training}) > 23_000  # a real corpus, not one problem repeated


def heldout_sharing(heldout: list[dict], training: list[Problem], key: Callable[[dict], Hashable],
                    train_key: Callable[[Problem], Hashable]) -> set[str]:
    seen = {train_key(problem) for problem in training}
    return {row["id"] for row in heldout if key(row) in seen}


@pytest.mark.parametrize(("what", "key", "train_key"), [
    ("problem text", lambda row: row["problem"], lambda problem: problem.problem),
    ("solution", lambda row: row["solution"], lambda problem: problem.solution),
    ("arithmetic (the start and each line '5 - 2 = 3.', names and items aside)",
     lambda row: arithmetic(row["steps"][0]["value"], [step["text"] for step in row["steps"][1:]]),
     lambda problem: arithmetic(problem.steps[0].value, [step.text for step in problem.steps[1:]])),
    ("numbers in order", lambda row: numbers_in_order(row["problem"]), lambda problem: numbers_in_order(
        problem.problem)),
])
def test_no_heldout_problem_shares_it_with_training(heldout: list[dict], training: list[Problem], what: str,
                                                    key: Callable[[dict], Hashable],
                                                    train_key: Callable[[Problem], Hashable]) -> None:
    assert heldout_sharing(heldout, training, key, train_key) == set(), what


def test_the_numbers_a_heldout_problem_shares_come_in_another_story(heldout: list[dict],
                                                                    training: list[Problem]) -> None:
    """As a multiset, a few held-out statements' numbers do occur in training, each time in another order, with
    other operations and another answer: nothing a model could have memorized."""
    by_numbers: dict[tuple[int, ...], list[Problem]] = {}
    for problem in training:
        by_numbers.setdefault(numbers_multiset(problem.problem), []).append(problem)
    shared = {row["id"]: by_numbers[numbers_multiset(row["problem"])] for row in heldout
              if numbers_multiset(row["problem"]) in by_numbers}
    assert set(shared) == SAME_MULTISET
    answers = {row["id"]: row["answer"] for row in heldout}
    assert all(answers[key] != problem.answer for key, problems in shared.items() for problem in problems)
