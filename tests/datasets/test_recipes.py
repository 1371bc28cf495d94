"""Each built-in dataset recipe of params.yaml normalizes its real file from ../shared/data."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT
from tracevote.cli.demo import BUILTIN_DELTABENCH
from tracevote.core.config import load_params
from tracevote.core.config_datasets import DatasetConfig
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.normalize import normalize_dataset
from tracevote.datasets.problems import Problem
from tracevote.datasets.steps import StepRecord

RECIPES = load_params(FIXTURE_PARAMS).datasets

# (recipe, shared file, keys where the shared copy differs from the hub's, rows, the first record's gold, meta kept)
CASES: list[tuple[str, str, dict[str, Any], int, Any, set[str]]] = [
    ("aime_2025", "aime_2025.jsonl", {"problem_key": "question"}, 30, 70, set()),
    ("aime_2024", "aime_2024_with_solutions.jsonl", {}, 30, 204, {"id", "solution", "url"}),
    ("aime_2024", "aime_2024.jsonl", {"problem_key": "question"}, 30, 204, set()),
    ("gsm8k", "gsm8k_test.jsonl", {}, 1319, 18, {"solution"}),  # the worked solution before ####
    ("math500", "math500_test.jsonl", {}, 500, "\\left( 3, \\frac{\\pi}{2} \\right)",
     {"solution", "subject", "level", "unique_id"}),
    ("amc23", "amc23_test.jsonl", {}, 40, 27, {"id", "problem", "url"}),
    ("processbench_gsm8k", "processbench_gsm8k.json", {}, 400, 1, {"generator", "final_answer_correct"}),
]


def recipe_on(name: str, path: Path, **keys: Any) -> DatasetConfig:
    recipe = RECIPES[name]
    return dataclasses.replace(recipe, source=dataclasses.replace(recipe.source, hf_dataset=None, path=str(path),
                                                                         watch=str(path)),
                               **keys)


@pytest.mark.parametrize(("name", "file", "keys", "rows", "first_gold", "meta"), CASES,
                         ids=[f"{case[0]}:{case[1]}" for case in CASES])
def test_each_recipe_normalizes_its_real_file(shared_data: Path, name: str, file: str, keys: dict[str, Any],
                                              rows: int, first_gold: Any, meta: set[str]) -> None:
    path = shared_data / file
    if not path.is_file():
        pytest.skip(f"{path} is absent from ../shared/data")
    records = normalize_dataset(read_local_rows(path), recipe_on(name, path, **keys), str(path))
    assert len(records) == rows
    first = records[0]
    assert (first.label if isinstance(first, StepRecord) else first.answer) == first_gold
    assert set(first.meta) == meta
    assert len({record.id for record in records}) == rows


def test_the_deltabench_recipe_converts_the_hub_csv_layout() -> None:
    """No real DeltaBench file is shared; the demo's hand-written CSV is laid out as the hub's Deltabench_v1.csv."""
    records = normalize_dataset(read_local_rows(BUILTIN_DELTABENCH),
                                recipe_on("deltabench", BUILTIN_DELTABENCH), str(BUILTIN_DELTABENCH))
    assert all(isinstance(record, StepRecord) for record in records)
    assert [(r.id, r.label, r.task) for r in records][:3] == [("demo-delta-0", -1, "math"), ("demo-delta-1", 3, "math"),
                                                             ("demo-delta-2", 1, "code")]
    assert records[1].steps[0] == "There are 5! = 120 arrangements in total."
    assert set(records[0].meta) == {"task_l2", "final_correct"}


def test_the_tinymath_recipe_normalizes_its_shipped_file() -> None:
    """The shipped small model's held-out set is a file in the repository, read by its relative path."""
    recipe = RECIPES["tinymath"]
    path = REPO_ROOT / recipe.source.path
    records = normalize_dataset(read_local_rows(path), recipe, str(path))
    assert len(records) == 100 and records[0].id == "tinymath-0"
    assert all(isinstance(record, Problem) and isinstance(record.answer, int) for record in records)
    # the steps (a list) stay in the file only; the solution is the grading critic's reference
    assert set(records[0].meta) == {"generator", "seed", "solution"}
    assert records[0].meta["solution"].splitlines()[-1] == f"\\boxed{{{records[0].answer}}}"


def test_every_recipe_is_tested_and_fetches_from_the_hub() -> None:
    assert {case[0] for case in CASES} | {"deltabench", "tinymath"} == set(RECIPES)
    hub = [recipe for name, recipe in RECIPES.items() if name != "tinymath"]
    assert all(recipe.source.hf_dataset and recipe.source.path is None for recipe in hub)


def test_integer_formats_give_integers_and_math_gives_text(shared_data: Path) -> None:
    for name, file in (("gsm8k", "gsm8k_test.jsonl"), ("amc23", "amc23_test.jsonl"), ("math500", "math500_test.jsonl")):
        path = shared_data / file
        if not path.is_file():
            pytest.skip(f"{path} is absent from ../shared/data")
        problems = normalize_dataset(read_local_rows(path), recipe_on(name, path), str(path))
        expected = str if RECIPES[name].answer_format == "math" else int
        assert all(isinstance(p, Problem) and type(p.answer) is expected for p in problems), name
