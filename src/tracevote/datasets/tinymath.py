"""tinymath: a seeded generator of short word problems with integer answers and step-by-step solutions.

It feeds the small model tracevote trains and ships (train/tinymath.py) and its held-out set. Every problem
tells a story about one person's items (a start, then purchases, losses, gifts, doublings), with distractor
sentences about other people or other items; its solution takes one line per operation, each line's value
known (`Step.value`), so the first wrong step of a sampled solution can be found exactly.

>>> problem = generate(seed=1, count=1)[0]
>>> problem.answer == problem.steps[-1].value
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

GENERATOR_VERSION = "tinymath-1"
# training problems come from seed + offset, its probes from seed + 2 * offset, the held-out set from its own seed
TRAIN_SEED_OFFSET = 1_000_003

NAMES = ("Ana", "Ben", "Cara", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivan", "Jo", "Kim", "Leo")
ITEMS = ("apples", "pens", "books", "coins", "cards", "shells", "stamps", "marbles", "cookies", "stickers")

Operation = Literal["start", "add", "subtract", "double"]


@dataclass(frozen=True)
class Step:
    """One line of a solution: `text` shows the operation, `value` its correct result."""

    operation: Operation
    operand: int
    value: int
    text: str


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    steps: tuple[Step, ...]
    answer: int

    @property
    def solution(self) -> str:
        return "\n".join(step.text for step in self.steps) + f"\n\\boxed{{{self.answer}}}"


@dataclass(frozen=True)
class Difficulty:
    """The generator's knobs: how many operations, how large the numbers, how many distractors."""

    min_operations: int = 2
    max_operations: int = 3
    max_start: int = 50
    max_operand: int = 30
    max_value: int = 99
    min_distractors: int = 0
    max_distractors: int = 1
    double_chance: float = 0.15


DEFAULT = Difficulty()

# (sentence with {name} {n} {item} {other}, operation); each reads naturally for every item
GAINS = ("{name} buys {n} more {item}.", "{name} finds {n} more {item}.", "{other} gives {name} {n} {item}.")
LOSSES = ("{name} gives {n} {item} to {other}.", "{name} loses {n} {item}.", "{name} sells {n} {item}.")
DISTRACTORS = ("{other} has {n} {item}.", "{name} also has {n} {item}.", "{other} buys {n} {item}.")


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _operation(rng: np.random.Generator, value: int, difficulty: Difficulty) -> tuple[Operation, int]:
    """The next operation on `value`, keeping every intermediate value in 0..max_value."""
    if value > 0 and 2 * value <= difficulty.max_value and rng.random() < difficulty.double_chance:
        return "double", 2
    can_add = value + 2 <= difficulty.max_value
    if value >= 2 and (not can_add or rng.random() < 0.5):
        return "subtract", int(rng.integers(1, min(value, difficulty.max_operand) + 1))
    return "add", int(rng.integers(1, min(difficulty.max_operand, difficulty.max_value - value) + 1))


def _apply(operation: Operation, value: int, operand: int) -> int:
    return {"add": value + operand, "subtract": value - operand, "double": value * operand}[operation]


def _step(operation: Operation, value: int, operand: int) -> Step:
    result = _apply(operation, value, operand)
    symbol = {"add": "+", "subtract": "-", "double": "*"}[operation]
    return Step(operation, operand, result, f"{value} {symbol} {operand} = {result}.")


def _sentence(rng: np.random.Generator, operation: Operation, operand: int, name: str, other: str,
              item: str) -> str:
    if operation == "double":
        return f"{name} doubles the {item}."
    template = _pick(rng, GAINS if operation == "add" else LOSSES)
    return template.format(name=name, other=other, n=operand, item=item)


def make_problem(rng: np.random.Generator, index: int, difficulty: Difficulty = DEFAULT) -> Problem:
    """One problem: the story's sentences in order, distractors inserted at random places."""
    name, other = (NAMES[i] for i in rng.choice(len(NAMES), size=2, replace=False))
    item, other_item = (ITEMS[i] for i in rng.choice(len(ITEMS), size=2, replace=False))
    start = int(rng.integers(1, difficulty.max_start + 1))
    steps = [Step("start", start, start, f"{name} starts with {start} {item}.")]
    sentences = [f"{name} has {start} {item}."]
    for _ in range(int(rng.integers(difficulty.min_operations, difficulty.max_operations + 1))):
        operation, operand = _operation(rng, steps[-1].value, difficulty)
        sentences.append(_sentence(rng, operation, operand, name, other, item))
        steps.append(_step(operation, steps[-1].value, operand))
    for _ in range(int(rng.integers(difficulty.min_distractors, difficulty.max_distractors + 1))):
        template = _pick(rng, DISTRACTORS)
        distractor_item = other_item if "{name}" in template else _pick(rng, (item, other_item))
        text = template.format(name=name, other=other, n=int(rng.integers(1, difficulty.max_operand + 1)),
                               item=distractor_item)
        sentences.insert(int(rng.integers(1, len(sentences) + 1)), text)
    question = f"How many {item} does {name} have now?"
    return Problem(f"tinymath-{index}", " ".join([*sentences, question]), tuple(steps), steps[-1].value)


def generate(seed: int, count: int, difficulty: Difficulty = DEFAULT) -> list[Problem]:
    """`count` problems, the same for the same seed, difficulty and GENERATOR_VERSION."""
    import numpy as np  # here: pool_steps, which fetch and check_params load for every dataset, needs no numpy

    rng = np.random.default_rng(seed)
    return [make_problem(rng, index, difficulty) for index in range(count)]


def training_problems(seed: int, count: int) -> list[Problem]:
    """The problems train/train_tinymath.py learns from with --seed `seed` (models/tinymath.json: seed 0, 24,000
    problems), regenerated without torch so a test can hold them against the held-out set."""
    return generate(seed + TRAIN_SEED_OFFSET, count, DEFAULT)


def step_values(text: str) -> list[int | None]:
    """The value each line of a solution states (the number after its last '='; None for a line with none).

    >>> step_values("Ana starts with 5 pens.\\n5 + 3 = 8.\\n\\\\boxed{8}")
    [5, 8, None]
    """
    values: list[int | None] = []
    for line in text.split("\n"):
        if "=" in line:
            tail = line.rsplit("=", 1)[1].strip().rstrip(".")
        else:
            digits = [word for word in line.rstrip(".").split() if word.isdigit()]
            tail = digits[0] if digits and not line.startswith("\\boxed") else ""
        values.append(int(tail) if tail.lstrip("-").isdigit() else None)
    return values


def first_error(problem: Problem, text: str) -> int:
    """The index of the first line of `text` whose value differs from the solution's step there; -1: none.

    A solution with fewer lines than steps is wrong at the first missing step.
    """
    return first_wrong_value([step.value for step in problem.steps], text)


def first_wrong_value(values: Sequence[int], text: str) -> int:
    """first_error from the generator's step values alone: the index of the first stated value (lines without
    one skipped) that differs from `values` there, or the first value missing; -1: none (values stated beyond
    the last step are not compared)."""
    stated = [value for value in step_values(text) if value is not None]
    for index, value in enumerate(values):
        if index >= len(stated) or stated[index] != value:
            return index
    return -1
