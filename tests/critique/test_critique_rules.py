"""ProcessBench's prompt, vote parsing, the tie rule and the scores, on hand cases."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PARAMS
from tracevote.core.config import load_params
from tracevote.core.config_datasets import StepsFormat
from tracevote.core.errors import ConfigError
from tracevote.critique.build import critique_setting
from tracevote.critique.metrics import Scored, by_task, f1_score, scores
from tracevote.critique.prompts import (
    BUILTIN_TEMPLATES,
    critique_messages,
    critique_template,
    load_template,
    tagged_response,
)
from tracevote.critique.votes import majority, parse_vote

# sha256 of each built-in template file, by the steps_format whose datasets get it. A changed hash is a changed
# prompt: the template's text is in each ledger's setting, so every critique of those datasets is paid for again.
# Change a file only to follow its source.
BUILTIN_SHA256 = [
    # QwenLM/ProcessBench code/templates/critique_template.txt at e8024636, byte for byte (checked with `fetch`)
    ("processbench", "0e7dba24bfaa9dea379907e11b8dc701c6cd6e74453ab2ffc9b1d63237cc4434"),
    # the template the DeltaBench write-up quotes (deltabench_processbench.py's README), its \boxed{} escaped as
    # \boxed{{}} for str.format; the next test checks the rendered text against the quote
    ("deltabench", "3b582115cd8817cf3d508fd47678281232522b66d6f94c3f68cead284a4f038e"),
]

PROBLEM, STEPS = "Find {x}.", ["Let x = 1.", "So x = 2."]  # braces in a problem are text, never fields
TAGGED = "<paragraph_0>\nLet x = 1.\n</paragraph_0>\n\n<paragraph_1>\nSo x = 2.\n</paragraph_1>"
RENDERED = [
    # (steps_format, the whole prompt for PROBLEM and STEPS)
    ("processbench",  # as ProcessBench's run_eval.py renders its file
     "The following is a math problem and a solution (split into paragraphs, enclosed with tags and indexed from "
     f"0):\n\n[Math Problem]\n\n{PROBLEM}\n\n[Solution]\n\n{TAGGED}\n\nYour task is to review and critique the "
     "solution paragraph by paragraph. Once you identify an error in a paragraph, return the index of the paragraph "
     "where the earliest error occurs. Otherwise, return the index of -1 (which typically denotes \"not found\")."
     "\n\nPlease put your final answer (i.e., the index) in \\boxed{}."),
    ("deltabench",  # the write-up's quote, its {problem} and {tagged_response} filled
     "The following is a problem and a solution (split into paragraphs, enclosed with tags and indexed from 0):"
     f"\n\n[Problem]\n{PROBLEM}\n\n[Solution]\n{TAGGED}\n\nYour task is to review and critique the solution "
     "paragraph by paragraph. Once you identify an error in a paragraph, return the index of the paragraph where "
     "the earliest error occurs. Otherwise, return the index of -1.\n\nPlease put your final answer (i.e., the "
     "index) in \\boxed{}."),
]


@pytest.mark.parametrize(("steps_format", "sha256"), BUILTIN_SHA256)
def test_each_builtin_template_file_is_pinned(steps_format: StepsFormat, sha256: str) -> None:
    assert hashlib.sha256(BUILTIN_TEMPLATES[steps_format].read_bytes()).hexdigest() == sha256


@pytest.mark.parametrize(("steps_format", "prompt"), RENDERED)
def test_each_builtin_template_renders_as_its_source_does(steps_format: StepsFormat, prompt: str) -> None:
    assert critique_messages(critique_template(None, steps_format), PROBLEM, STEPS) == [
        {"role": "user", "content": prompt}]


SETTINGS = [
    # (critique.template, dataset, the file its template is, or None for critique.template's text)
    (None, "processbench_gsm8k", "processbench"),
    (None, "deltabench", "deltabench"),
    ("{problem}\n{tagged_response}\nBox the index.", "processbench_gsm8k", None),
    ("{problem}\n{tagged_response}\nBox the index.", "deltabench", None),
]


@pytest.mark.parametrize(("template", "dataset", "builtin"), SETTINGS)
def test_a_ledgers_setting_holds_the_template_text_its_dataset_gets(template: str | None, dataset: str,
                                                                    builtin: StepsFormat | None) -> None:
    params = load_params(FIXTURE_PARAMS)
    params = dataclasses.replace(params, critique=dataclasses.replace(params.critique, template=template))
    expected = load_template(BUILTIN_TEMPLATES[builtin]) if builtin else template
    assert critique_setting(params, dataset)["template"] == expected


def test_tagged_steps_are_indexed_from_0_and_stripped_at_the_end() -> None:
    assert tagged_response(["a", "b"]) == "<paragraph_0>\na\n</paragraph_0>\n\n<paragraph_1>\nb\n</paragraph_1>"


def test_a_template_without_its_fields_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("Critique {problem}.")
    with pytest.raises(ConfigError, match=re.escape("lacks {tagged_response}")):
        load_template(path)


@pytest.mark.parametrize(("text", "vote"), [
    ("The earliest error is in paragraph 2, so \\boxed{2}.", 2),
    ("\\boxed{1} ... on reflection \\boxed{ 3 }", 3),  # the last box, stripped
    ("\\boxed{-1}", -1),
    ("\\boxed{+4}", 4),
    ("\\boxed{-2}", None),  # below -1
    ("\\boxed{two}", None),
    ("\\boxed{1.5}", None),
    ("\\boxed{\\text{3}}", None),  # nested braces: the original's [^}]* reads '\\text{3' ... not an integer
    ("paragraph 3 is wrong", None),  # no box
])
def test_a_vote_is_the_last_boxed_integer_of_at_least_minus_one(text: str, vote: int | None) -> None:
    assert parse_vote(text) == vote


def test_the_most_common_vote_wins_and_a_tie_goes_to_the_first_seen() -> None:
    assert majority([3, 1, 1, 3, None]).prediction == 3
    assert majority([None, 1, 3, 3, 1]).prediction == 1
    assert majority([2, 2, 5]).prediction == 2
    nothing = majority([None, None])
    assert (nothing.prediction, nothing.unparsable, nothing.unanimous) == (None, 2, False)
    assert majority([4, 4, 4]).unanimous and not majority([4, 4, None]).unanimous


def item(task: str, label: int, prediction: int | None, unanimous: bool = True, unparsable: int = 0) -> Scored:
    return Scored(task, label, prediction, unanimous, votes=8, unparsable=unparsable)


def test_scores_follow_processbench_with_null_for_an_empty_subset() -> None:
    items = [item("gsm8k", 2, 2), item("gsm8k", 0, 1), item("gsm8k", -1, -1), item("gsm8k", -1, None, False, 8),
             item("math", 3, 3), item("math", 1, 1)]
    overall = scores(items)
    assert (overall.n_error, overall.n_correct) == (4, 2)
    assert (overall.error_acc, overall.correct_acc) == (0.75, 0.5)
    assert overall.f1 == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    assert overall.unanimous_share == pytest.approx(5 / 6) and overall.unparsable_share == pytest.approx(8 / 48)
    math = by_task(items)["math"]
    assert (math.n_correct, math.error_acc, math.correct_acc, math.f1) == (0, 1.0, None, None)
    assert list(by_task(items)) == ["gsm8k", "math"]


def test_f1_is_zero_when_both_accuracies_are_zero_and_null_when_one_is_missing() -> None:
    assert f1_score(0.0, 0.0) == 0.0
    assert f1_score(None, 0.5) is None and f1_score(0.5, None) is None
    empty = scores([])
    assert (empty.error_acc, empty.correct_acc, empty.f1, empty.unanimous_share) == (None, None, None, None)
