"""The built-in AIME examples: each one's stated answer is its worked solution's box, none is (or holds) a
problem the project debates or ships, and a bad examples file is refused naming the example and field."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.debate.scripted import CFG, PROBLEM, answers_script, boxed, run_scripted
from tracevote.answers.extract import extract_answer
from tracevote.cli.demo import BUILTIN_DATA
from tracevote.core.config_methods import BUILTIN_EXAMPLES
from tracevote.core.errors import DataError
from tracevote.datasets.local import read_local_rows
from tracevote.debate import prompts
from tracevote.debate.examples import BUILTIN_FILES, builtin_examples, examples_text, read_examples

EXAMPLES = builtin_examples("builtin_aime")
TOPICS = ("divisibility and number theory", "combinatorics with generating functions", "geometric progressions")
# the real files of the datasets the project is configured with (../shared/data), and the text key of each
SHARED_FILES = {"aime_2024.jsonl": "question", "aime_2025.jsonl": "question",
                "aime_2024_with_solutions.jsonl": "problem", "math500_test.jsonl": "problem",
                "amc23_test.jsonl": "problem", "gsm8k_test.jsonl": "question"}
DEMO_FILES = {"demo_problems.jsonl": "problem", "demo_gsm8k.jsonl": "question", "demo_steps.jsonl": "problem",
              "demo_deltabench.csv": "question"}


def squeezed(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def clashes(rows: list[dict[str, Any]], key: str) -> list[str]:
    """The examples that equal or contain a row's problem (or that a row's problem contains)."""
    problems = [squeezed(str(row[key])) for row in rows]
    return [example.source.label() for example in EXAMPLES for problem in problems
            if problem and (problem in squeezed(example.problem) or squeezed(example.problem) in problem)]


def test_the_builtin_names_match_the_config_list() -> None:
    assert tuple(BUILTIN_FILES) == BUILTIN_EXAMPLES


def test_one_example_per_topic_of_the_writeup_all_from_before_2024() -> None:
    assert tuple(example.topic for example in EXAMPLES) == TOPICS
    assert all(example.source.year < 2024 for example in EXAMPLES)
    assert len({example.source for example in EXAMPLES}) == len(EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.source.label())
def test_the_stated_answer_is_the_worked_solutions_box(example: Any) -> None:
    assert extract_answer(example.solution) == example.answer
    assert example.solution.count("\\boxed{") == 1


@pytest.mark.parametrize(("name", "key"), DEMO_FILES.items())
def test_no_example_is_a_demo_problem(name: str, key: str) -> None:
    assert clashes(read_local_rows(BUILTIN_DATA / name), key) == []


@pytest.mark.parametrize(("name", "key"), SHARED_FILES.items())
def test_no_example_is_a_problem_of_the_real_data(shared_data: Path, name: str, key: str) -> None:
    if not (shared_data / name).is_file():
        pytest.skip(f"{shared_data / name} is not in the shared data")
    rows = read_local_rows(shared_data / name)
    assert rows and all(key in row for row in rows), f"{name}: its problems are not under {key!r}"
    assert clashes(rows, key) == []


@pytest.mark.parametrize(("setting", "expected"), [
    (None, None),
    ("Problem: 1+1?\nAnswer: \\boxed{2}", "Problem: 1+1?\nAnswer: \\boxed{2}"),  # text is used as it is
])
def test_examples_text_passes_null_and_text_through(setting: str | None, expected: str | None) -> None:
    assert examples_text(setting) == expected


def test_the_builtin_set_renders_in_dylans_layout() -> None:
    text = examples_text("builtin_aime")
    assert text is not None
    blocks = text.split("\n\nProblem: ")
    assert len(blocks) == len(EXAMPLES) and text.startswith("Problem: Find the remainder when $9 \\times 99")
    for block, example in zip(blocks, EXAMPLES, strict=True):
        assert "\nAnswer: Let's think step by step\n" in block
        assert block.endswith(f"\\boxed{{{example.answer}}}$.\nThe answer is {example.answer}")
    assert "AIME" not in text, "the prompt names no source, as DyLAN's examples do not"


def test_every_call_quotes_the_examples_before_the_problem() -> None:
    cfg = dataclasses.replace(CFG, examples="builtin_aime")
    _, calls = run_scripted(answers_script(r0=[1, 2, 3, 4], r1=[1, 2, 3, 4]) | {
        "rank": "[1, 2]", "r2/pick1": boxed(5), "r2/pick2": boxed(6)}, cfg)
    asked = f"{examples_text('builtin_aime')}\n\n{cfg.question.replace('{problem}', PROBLEM.problem)}"
    assert calls[0].messages[1]["content"] == asked
    later = [call.messages[-1]["content"] for call in calls[4:]]
    assert later and all(content.startswith(prompts.FOLLOW_EXAMPLES + asked) for content in later)


GOOD = {"source": {"year": 2011, "contest": "II", "problem": 5}, "topic": "t", "problem": "P?",
        "solution": "So $\\boxed{542}$.", "answer": 542}


@pytest.mark.parametrize(("change", "says"), [
    ({"answer": 541}, "example 1: field 'solution': must end in \\boxed{541}"),
    ({"answer": "542"}, "example 1: field 'answer': expected an integer 0-999, got '542'"),
    ({"answer": 1000}, "example 1: field 'answer': expected an integer 0-999, got 1000"),
    ({"solution": "The answer is 542."}, "example 1: field 'solution': must end in \\boxed{542}"),
    ({"problem": " "}, "example 1: field 'problem': expected non-empty text"),
    ({"source": {"year": 2024, "contest": "I", "problem": 1}},
     "field 'source': year 2024 must be an integer 2000-2023"),
    ({"source": {"year": 2011, "contest": "III", "problem": 1}}, "field 'source': contest 'III' must be one of I, II"),
    ({"source": {"year": 2011, "contest": "I", "problem": 16}}, "field 'source': problem 16 must be an integer 1-15"),
    ({"source": {"year": 2011, "problem": 1}}, "field 'source': expected {year, contest, problem}"),
    ({"hint": "x"}, "example 1: expected an object with exactly source, topic, problem, solution, answer"),
])
def test_a_bad_example_is_refused_naming_the_file_example_and_field(tmp_path: Path, change: dict[str, Any],
                                                                     says: str) -> None:
    path = tmp_path / "examples.json"
    path.write_text(json.dumps([{**GOOD, **change}]))
    with pytest.raises(DataError, match=re.escape(f"{path}: example 1: ") + ".*" + re.escape(says.split(": ", 1)[1])):
        read_examples(path)


def test_a_good_example_reads() -> None:
    assert EXAMPLES[2].source.label() == "2011 AIME II Problem 5" and EXAMPLES[2].answer == 542
