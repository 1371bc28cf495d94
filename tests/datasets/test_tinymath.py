"""tinymath, the generator the shipped small model learns from: seeded, and every step's label right."""

from __future__ import annotations

import dataclasses
import re

import pytest

from tracevote.answers.extract import extract_answer
from tracevote.datasets.tinymath import DEFAULT, GENERATOR_VERSION, Problem, first_error, generate, step_values

SENTENCE_OPERATION = [  # (sentence pattern, the operation it tells), read independently of the generator's code
    (re.compile(r"^(\w+) has (\d+) (\w+)$"), "start"),
    (re.compile(r"^(\w+) (?:buys|finds) (\d+) more (\w+)$"), "add"),
    (re.compile(r"^\w+ gives (\w+) (\d+) (\w+)$"), "add"),
    (re.compile(r"^(\w+) (?:gives (\d+) (\w+) to \w+|loses (\d+) (\w+)|sells (\d+) (\w+))$"), "subtract"),
    (re.compile(r"^(\w+) doubles the (\w+)$"), "double"),
]


def told_answer(problem: str) -> int:
    """The answer read from the story alone: the asked person's asked item, sentence by sentence."""
    *sentences, question = problem.split(". ")
    name, item = re.fullmatch(r"How many (\w+) does (\w+) have now\?", question).group(2, 1)  # type: ignore[union-attr]
    value = 0
    for sentence in sentences:
        for pattern, operation in SENTENCE_OPERATION:
            match = pattern.match(sentence.rstrip("."))
            if not match:
                continue
            words = [group for group in match.groups() if group]
            if words[0] != name or words[-1] != item:
                break  # a distractor: someone else, or another item
            if operation == "double":
                value *= 2
            else:
                amount = int(words[1])
                value = {"start": amount, "add": value + amount, "subtract": value - amount}[operation]
            break
    return value


def test_the_same_seed_gives_the_same_problems_and_another_seed_others() -> None:
    assert generate(5, 50) == generate(5, 50)
    assert [p.problem for p in generate(5, 50)] != [p.problem for p in generate(6, 50)]
    assert generate(5, 50)[:10] == generate(5, 10)  # a longer run starts with the shorter one


def test_the_first_problems_of_seed_0_are_pinned() -> None:
    """A change to the generator that changes its problems must change GENERATOR_VERSION (the shipped model and
    its held-out set name the version they were made with)."""
    first = generate(0, 1)[0]
    assert GENERATOR_VERSION == "tinymath-1"
    assert (first.problem, first.answer) == (PINNED_PROBLEM, PINNED_ANSWER)


PINNED_PROBLEM = "Jo has 4 coins. Jo finds 16 more coins. Hana gives Jo 17 coins. How many coins does Jo have now?"
PINNED_ANSWER = 37


@pytest.mark.parametrize("seed", [0, 1, 31])
def test_every_label_is_the_story_read_independently(seed: int) -> None:
    for problem in generate(seed, 300):
        assert problem.answer == told_answer(problem.problem), problem.problem
        assert problem.answer == problem.steps[-1].value == extract_answer(problem.solution)


@pytest.mark.parametrize("seed", [0, 1])
def test_steps_chain_and_stay_in_range(seed: int) -> None:
    for problem in generate(seed, 300):
        first, *rest = problem.steps
        assert first.operation == "start" and first.value == first.operand
        assert DEFAULT.min_operations <= len(rest) <= DEFAULT.max_operations
        previous = first.value
        for step in rest:
            expected = {"add": previous + step.operand, "subtract": previous - step.operand,
                        "double": previous * 2}[step.operation]
            assert step.value == expected and 0 <= step.value <= DEFAULT.max_value
            assert step.text == f"{previous} {dict(add='+', subtract='-', double='*')[step.operation]} " \
                                f"{step.operand} = {step.value}."
            previous = step.value
        assert step_values(problem.solution) == [step.value for step in problem.steps] + [None]


def test_distractors_and_carries_occur() -> None:
    problems = generate(0, 500)
    assert sum(told_answer(p.problem) == p.answer and len(p.problem.split(". ")) > len(p.steps) + 1
               for p in problems) > 100  # stories with a sentence that does not count
    carries = [step for problem in problems for step in problem.steps
               if step.operation == "add" and (step.value - step.operand) % 10 + step.operand % 10 >= 10]
    assert len(carries) > 100


def _problem() -> Problem:
    return generate(3, 1)[0]


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda lines: lines, -1),
    (lambda lines: [lines[0].replace(lines[0].split()[3], "999"), *lines[1:]], 0),
    (lambda lines: [*lines[:2], re.sub(r"= \d+", "= 1000", lines[2]), *lines[3:]], 2),
    (lambda lines: lines[:2], 2),  # stops early: the first missing step is wrong
])
def test_first_error_finds_the_first_wrong_line(edit, expected: int) -> None:  # type: ignore[no-untyped-def]
    problem = _problem()
    text = "\n".join(edit(problem.solution.split("\n")))
    assert first_error(problem, text) == expected


def test_difficulty_is_a_frozen_knob() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT.max_value = 5  # type: ignore[misc]
    harder = dataclasses.replace(DEFAULT, min_operations=4, max_operations=4)
    assert all(len(p.steps) == 5 for p in generate(0, 20, harder))
