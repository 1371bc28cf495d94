"""debate.problems: which problems of a dataset are debated, and how the manifest records it (debate.build)."""

from __future__ import annotations

import re

import pytest

from tracevote.core.errors import ConfigError
from tracevote.datasets.problems import Problem
from tracevote.debate.build import DebateManifest, Selection, select_problems

FIFTEEN = [Problem(f"aime-{i:02d}", f"Problem {i}?", i) for i in range(15)]


@pytest.mark.parametrize(("span", "positions"), [
    (None, tuple(range(15))),
    ((0, 14), tuple(range(15))),  # the write-up's `0 14`: files 0.json..14.json, all fifteen
    ((0, 0), (0,)),  # the write-up's sample run, `0 0`: one problem
    ((3, 5), (3, 4, 5)),
    ((10, 99), (10, 11, 12, 13, 14)),  # an end past the last problem stops there
    ((14, 14), (14,)),
])
def test_a_span_selects_start_to_end_included(span: tuple[int, int] | None, positions: tuple[int, ...]) -> None:
    assert select_problems(FIFTEEN, span, "aime") == Selection(span, positions, 15)


def test_a_span_starting_past_the_last_problem_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("debate.problems: [15, 20] starts past the last problem of "
                                                    "aime, which has 15 (positions 0-14)")):
        select_problems(FIFTEEN, (15, 20), "aime")


@pytest.mark.parametrize(("stored", "selection"), [
    ({}, Selection(None, (0, 1), 2)),  # written before ranges: every problem, in order
    ({"span": [3, 4], "positions": [3, 4], "dataset_problems": 30}, Selection((3, 4), (3, 4), 30)),
])
def test_the_manifest_gives_back_its_selection(stored: dict, selection: Selection) -> None:
    manifest = DebateManifest(dataset="aime", ledger="x", fingerprint="f", finished=2, simulated=True, setting={},
                              problems=[p.to_record() for p in FIFTEEN[:2]], **stored)
    assert manifest.selection() == selection
