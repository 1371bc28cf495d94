"""Where `grade --enable-critic` keeps the critic's ledger: the folder named by --critic-dir; else the pipeline's
folder of the grading run whose predictions file it grades (one ledger for both, so an item is paid once); else the
command line's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PARAMS
from tracevote.cli.grade import critic_folder
from tracevote.core.config import load_params


@pytest.mark.parametrize(("critic_dir", "pred_path", "expected"), [
    (None, "pools/aime_2025.json", (Path("grading/critic/pool_aime_2025"), "pool_aime_2025")),  # a run's file
    (None, "./pools/../pools/aime_2025.json", (Path("grading/critic/pool_aime_2025"), "pool_aime_2025")),
    (None, "predictions/elsewhere.jsonl", (Path("grading/critic/cli"), None)),  # no run grades it
    ("mine", "pools/aime_2025.json", (Path("mine"), None)),  # named: as named, shared with no run
])
def test_the_critic_folder(critic_dir: str | None, pred_path: str, expected: tuple[Path, str | None]) -> None:
    params = load_params(FIXTURE_PARAMS)
    assert critic_folder(None if critic_dir is None else Path(critic_dir), Path(pred_path), params) == expected
