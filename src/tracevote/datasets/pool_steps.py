"""A steps dataset made of a model's own tinymath solutions: the traces of a DeepConf pool, each cut into its lines
and labelled with its first wrong line by the generator's step values (`source.pool` of a dataset of kind steps).

    Kim starts with 4 apples.      step 0   the generator's 4: right
    4 - 9 = 5.                     step 1   the generator's 2: the first wrong step, label 1
    5 + 2 = 7.                     step 2
    7 + 10 = 18.                   step 3
    \\boxed{18}                     step 4   the final answer: wrong when it is not the gold, or comes too early

Rows come out in ProcessBench's layout (id, problem, steps, label, task, and scalar fields kept as meta), so
normalize, build_critiques, score_critiques and report_critiques read them as any other steps dataset.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracevote.core.errors import DataError, listed
from tracevote.datasets.problems import Problem
from tracevote.datasets.tinymath import first_wrong_value, step_values

BOX_LINE = re.compile(r"\\boxed\{([^{}]*)\}")  # the whole last line: \boxed{18}; \boxed{} or \boxed{x} box no integer
INTEGER = re.compile(r"-?\d+")
STEPS_FIELD = "steps"  # the generator's rows: [{"text": "Kim starts with 4 apples.", "value": 4}, ...]
Why = str  # why a trace gave no solution: "truncated", "no box", "duplicate"


@dataclass(frozen=True)
class GeneratorProblem:
    """A pool dataset's problem as the generator wrote it: its id (as normalize gives it), text, answer and the
    value of every step."""

    id: str
    problem: str
    answer: int
    values: tuple[int, ...]


@dataclass(frozen=True)
class Trace:
    """One pooled trace: what the labelling reads of a pool sample."""

    sample_id: int
    text: str
    finish_reason: str


@dataclass(frozen=True)
class Solution:
    problem_id: str
    sample_id: int
    steps: tuple[str, ...]
    label: int
    boxed: int | None


def cut_steps(text: str) -> tuple[str, ...]:
    """A solution's steps: its lines, stripped, blank ones left out (tinymath writes one operation a line).

    >>> cut_steps("Ana starts with 5 pens.\\n5 + 3 = 8.\\n\\n\\\\boxed{8}")
    ('Ana starts with 5 pens.', '5 + 3 = 8.', '\\\\boxed{8}')
    """
    return tuple(line.strip() for line in text.split("\n") if line.strip())


def boxed_value(line: str) -> tuple[bool, int | None]:
    """(whether `line` is a box line, the integer it boxes or None)."""
    match = BOX_LINE.fullmatch(line)
    if match is None:
        return False, None
    content = match.group(1).strip()
    return True, int(content) if INTEGER.fullmatch(content) else None


def first_wrong_step(values: Sequence[int], answer: int, steps: Sequence[str]) -> int:
    """The index of the first wrong step of a solution ending in a box line (-1: none), from the generator's values:
    first_wrong_value's step, at the line that states it; a value stated beyond the last step (an operation the
    story has not); a box reached before every step (it concludes too early), or boxing another number.

    >>> first_wrong_value([4, 2], "Kim starts with 4 apples.\\n4 - 2 = 2.\\n2 + 1 = 3.")  # blind to the extra line
    -1
    >>> first_wrong_step([4, 2], 2, ["Kim starts with 4 apples.", "4 - 2 = 2.", "2 + 1 = 3.", "\\\\boxed{3}"])
    2
    """
    *body, box = steps
    stated = [index for index, value in enumerate(step_values("\n".join(body))) if value is not None]
    wrong = first_wrong_value(values, "\n".join(body))
    if wrong >= 0:
        return stated[wrong] if wrong < len(stated) else len(body)  # a missing step: the box came too early
    if len(stated) > len(values):
        return stated[len(values)]
    return -1 if boxed_value(box)[1] == answer else len(body)


def label_trace(problem: GeneratorProblem, trace: Trace) -> Solution | Why:
    """The trace as a labelled solution, or why it is none: cut off at max_tokens (truncated), or not ending in a
    box line (no box): the generator's values say nothing of a solution that never concludes."""
    if trace.finish_reason == "length":
        return "truncated"
    steps = cut_steps(trace.text)
    is_box, boxed = boxed_value(steps[-1]) if steps else (False, None)
    if not is_box:
        return "no box"
    label = first_wrong_step(problem.values, problem.answer, steps)
    return Solution(problem.id, trace.sample_id, steps, label, boxed)


def choose(solutions: Sequence[Solution], per_problem: int | None, seed: int, problem_id: str) -> list[Solution]:
    """At most `per_problem` of one problem's solutions, half right (label -1) and half wrong, the shorter side
    topped up from the other; drawn by a generator seeded by `seed` and the problem's id (so adding a problem changes
    no other's draw); returned by sample id."""
    right = [s for s in solutions if s.label == -1]
    wrong = [s for s in solutions if s.label != -1]
    if per_problem is None or len(solutions) <= per_problem:
        return sorted(solutions, key=lambda s: s.sample_id)
    n_right = min(len(right), max(per_problem // 2, per_problem - len(wrong)))
    n_wrong = min(len(wrong), per_problem - n_right)
    import numpy as np  # here: fetch and check_params import this module for every dataset, few draw solutions

    digest = int.from_bytes(hashlib.sha256(problem_id.encode()).digest()[:8], "big")
    rng = np.random.default_rng([seed, digest])
    picked = [right[i] for i in rng.permutation(len(right))[:n_right]]
    picked += [wrong[i] for i in rng.permutation(len(wrong))[:n_wrong]]
    return sorted(picked, key=lambda s: s.sample_id)


@dataclass(frozen=True)
class Derived:
    """The rows of a dataset made of a pool's traces, and what became of every trace."""

    rows: list[dict[str, Any]]
    traces: int
    dropped: dict[Why, int]

    def summary(self) -> str:
        """"800 traces: 120 duplicate, 2 truncated; 400 solutions (200 without an error, 200 with one)"."""
        right = sum(row["label"] == -1 for row in self.rows)
        dropped = ", ".join(f"{count} {why}" for why, count in sorted(self.dropped.items()) if count)
        return (f"{self.traces} traces{': ' + dropped if dropped else ''}; {len(self.rows)} solutions ({right} "
                f"without an error, {len(self.rows) - right} with one)")


def derive_rows(problems: Sequence[GeneratorProblem], traces: Mapping[str, Sequence[Trace]], *, task: str,
                per_problem: int | None, seed: int, simulated: bool) -> Derived:
    """ProcessBench-layout rows from each problem's traces: each distinct trace text once (the first sample), cut
    and labelled (label_trace), then chosen (choose). `task` names the pool dataset."""
    rows: list[dict[str, Any]] = []
    dropped: dict[Why, int] = {"duplicate": 0, "no box": 0, "truncated": 0}
    count = 0
    for problem in problems:
        solutions, seen = [], set()
        for trace in sorted(traces[problem.id], key=lambda t: t.sample_id):
            count += 1
            if trace.text in seen:
                dropped["duplicate"] += 1
                continue
            seen.add(trace.text)
            labelled = label_trace(problem, trace)
            if isinstance(labelled, str):
                dropped[labelled] += 1
            else:
                solutions.append(labelled)
        rows.extend(_row(problem, solution, task, simulated)
                    for solution in choose(solutions, per_problem, seed, problem.id))
    return Derived(rows, count, dropped)


def _row(problem: GeneratorProblem, solution: Solution, task: str, simulated: bool) -> dict[str, Any]:
    return {"id": f"{problem.id}-s{solution.sample_id}", "problem": problem.problem, "steps": list(solution.steps),
            "label": solution.label, "task": task, "problem_id": problem.id, "sample_id": solution.sample_id,
            "gold": problem.answer, "boxed": solution.boxed, "answer_correct": solution.boxed == problem.answer,
            "simulated": simulated}


def generator_problems(rows: Sequence[dict[str, Any]], normalized: Sequence[Problem], origin: str,
                       where: str) -> list[GeneratorProblem]:
    """The pool dataset's problems with the generator's step values, from its raw rows and the problems normalize
    made of them (row by row); or one DataError naming `origin`, each bad row and field, and `where` (the
    source.pool key that named the dataset)."""
    problems, errors = [], []
    for number, (row, record) in enumerate(zip(rows, normalized, strict=True), start=1):
        answer = record.answer
        values = _step_values(row.get(STEPS_FIELD))
        if values is None:
            errors.append(f"row {number}: field {STEPS_FIELD!r}: expected the generator's steps, a list of "
                          f"{{\"text\", \"value\"}} with integer values, got {row.get(STEPS_FIELD)!r:.80}")
        elif not isinstance(answer, int) or answer != values[-1]:
            errors.append(f"row {number}: its answer {answer!r} is not its last step's value {values[-1]}")
        else:
            problems.append(GeneratorProblem(record.id, record.problem, answer, values))
    if errors:
        raise DataError(f"{origin}: {len(errors)} row(s) do not come from the tinymath generator, which {where} "
                        f"needs (it labels each solution by the generator's step values):\n  {listed(errors)}")
    return problems


def _step_values(steps: Any) -> tuple[int, ...] | None:
    if not isinstance(steps, list) or not steps:
        return None
    values = [step.get("value") if isinstance(step, dict) and isinstance(step.get("text"), str) else None
              for step in steps]
    if any(isinstance(value, bool) or not isinstance(value, int) for value in values):
        return None
    return tuple(values)
