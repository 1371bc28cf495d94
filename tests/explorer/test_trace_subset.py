"""view.trace_pages: which of a problem's traces get a trace page (tracevote.explorer.trace_subset), and the
setting's validation (one line naming the key and the value)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.core.test_config import params_with
from tracevote.core.config import load_params
from tracevote.core.config_deepconf import MEASURES
from tracevote.core.config_view import Measure, ViewConfig
from tracevote.core.errors import ConfigError
from tracevote.explorer.trace_subset import chosen_traces, subset_note

NAN = float("nan")


def test_the_measures_are_the_score_tables() -> None:
    assert Measure.__args__ == MEASURES


def test_the_ends_by_the_chosen_measure_ties_to_the_smaller_id_and_nan_at_neither_end() -> None:
    columns = {"sample_id": [4, 7, 1, 9, 2, 5, 3],
               "avg": [0.5, 0.9, 0.9, NAN, 0.1, 0.3, 0.7],
               "tail": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}
    # avg: most 0.9 (ids 1 and 7: the smaller first), then 0.7 (3); least 0.1 (2), 0.3 (5); 9 has none
    assert chosen_traces(columns, ViewConfig(trace_pages=2, trace_pages_by="avg")).ids == {1, 7, 2, 5}
    assert chosen_traces(columns, ViewConfig(trace_pages=1, trace_pages_by="avg")).ids == {1, 2}
    assert chosen_traces(columns, ViewConfig(trace_pages=2, trace_pages_by="tail")).ids == {3, 5, 4, 7}


@pytest.mark.parametrize(("per_end", "every"), [(3, False), (4, True), (None, True)])
def test_a_problem_of_at_most_twice_the_setting_gets_every_trace(per_end: int | None, every: bool) -> None:
    columns = {"sample_id": list(range(8)), "avg": [0.1 * i for i in range(8)]}
    subset = chosen_traces(columns, ViewConfig(trace_pages=per_end))
    assert (subset.ids is None) == every
    assert all(subset.has_page(i) for i in range(8)) == every
    assert (subset_note(subset, 8) is None) == every


def test_the_note_says_which_setting_and_how_many() -> None:
    subset = chosen_traces({"sample_id": list(range(10)), "lowest": [float(i) for i in range(10)]},
                           ViewConfig(trace_pages=2, trace_pages_by="lowest"))
    assert subset_note(subset, 10) == {"pages": 4, "traces": 10, "per_end": 2, "by": "lowest", "ids": [0, 1, 8, 9]}
    assert subset.has_page(9) and not subset.has_page(5)


def test_the_fixtures_default_is_32_by_avg() -> None:
    assert load_params(Path(__file__).parents[1] / "fixtures" / "params.yaml").view == ViewConfig(32, "avg")


@pytest.mark.parametrize(("key", "value", "says"), [
    ("view.trace_pages", 0, "view.trace_pages: 0"),
    ("view.trace_pages", "all", "view.trace_pages: expected an integer, got 'all'"),
    ("view.trace_pages_by", "median", "view.trace_pages_by: 'median' is not one of 'avg', 'bottom10', 'lowest', "
                                      "'tail'"),
])
def test_a_bad_setting_is_one_line_naming_the_key(tmp_path: Path, key: str, value: Any, says: str) -> None:
    path = params_with(tmp_path, key, value)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {says}")) as raised:
        load_params(path)
    assert len(str(raised.value).splitlines()) == 1


def test_null_gives_every_trace_a_page(tmp_path: Path) -> None:
    assert load_params(params_with(tmp_path, "view.trace_pages", None)).view.trace_pages is None
