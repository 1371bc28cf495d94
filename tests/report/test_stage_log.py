"""score_debate's and score_critiques' logs: one labelled line per figure, rounded in its unit."""

from __future__ import annotations

import re

from tests.critique.test_results import results as critique_results
from tests.debate.test_results import CFG, four_results
from tracevote.critique.results import critique_metrics
from tracevote.debate.results import debate_metrics
from tracevote.report.stage_log import CRITIQUE_LABELS, DEBATE_LABELS, figure_lines

UNROUNDED = re.compile(r"\d\.\d{3,}")  # a float printed with every digit, as `key: value` did


def labelled(lines: list[str]) -> dict[str, str]:
    return dict(re.fullmatch(r"  (.+?) {2,}(\S.*)", line).groups() for line in lines)


def test_the_debate_log_labels_and_rounds_every_figure() -> None:
    metrics = debate_metrics(four_results(), CFG, simulated=True)
    lines = figure_lines(metrics, DEBATE_LABELS)
    assert len(lines) == len(metrics) - 1  # one line per figure; the banner says simulated
    shown = labelled(lines)
    assert shown["accuracy"] == f"{metrics['accuracy_pct']:.2f}%"
    assert shown["accuracy on aime_2025_I"] == f"{metrics['accuracy_aime_2025_I_pct']:.2f}%"
    assert shown["cost per problem"].startswith("$")
    assert shown["completion tokens per problem"] == f"{metrics['completion_tokens_per_problem']:,.1f}"
    assert shown["problems debated"] == "4" and "stopped after round0" in shown
    assert not any(UNROUNDED.search(value) for value in shown.values())
    assert not set(shown) & set(metrics)  # no raw key left
    assert len({line.index(value) for line, value in zip(lines, shown.values(), strict=True)}) == 1  # one column


def test_the_critique_log_labels_each_dataset_and_shows_an_empty_subset_as_n_a() -> None:
    metrics = critique_metrics(critique_results(), simulated=False)
    shown = labelled(figure_lines(metrics, CRITIQUE_LABELS))
    assert len(shown) == len(metrics) - 1
    assert shown["F1"] == f"{metrics['f1_pct']:.2f}%" and shown["cost"].startswith("$")
    per_dataset = [label for label in shown if label.startswith("F1, ") and label != "F1, mean over datasets"]
    assert per_dataset and all(not UNROUNDED.search(value) for value in shown.values() if value[0] != "$")
    assert "n/a" in shown.values()  # a subset with no solution of its kind
    assert set(shown) & set(metrics) == {"solutions"}  # no raw key left: each label is words
