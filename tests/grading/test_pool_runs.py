"""A pool graded as a prediction file: its traces in sample-id order, whatever order its calls finished in."""

import dataclasses
import shutil
from pathlib import Path

from tests.conftest import FIXTURES
from tracevote.core.config_datasets import AnswersConfig
from tracevote.grading.runs import pool_predictions
from tracevote.store import codec
from tracevote.store.pool import Pool, write_manifest


def test_traces_stored_out_of_order_are_graded_in_sample_id_order(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "pool_v1", tmp_path / "pool")
    pool = Pool(tmp_path / "pool")
    first = next(s for s in pool.iter_samples("p2") if s.sample_id == 0)
    with pool.writer("p2") as writer:  # as concurrent calls finish: 6 before 5 before 4
        for sample_id in (6, 5, 4):
            writer.append(sample_id, codec.encode(dataclasses.replace(first, sample_id=sample_id)))
    write_manifest(tmp_path / "toy.json", pool, "toy", 6, ["p1", "p2", "p3"])
    answers = AnswersConfig(fallback="none", truncated_fallback=False)
    predictions, simulated = pool_predictions(tmp_path / "toy.json", answers)
    assert [(p.id, p.line) for p in predictions if p.id == "p2"] == [("p2", i) for i in range(6)]  # 6 is past n_pool
    assert [p.id for p in predictions] == ["p1"] * 4 + ["p2"] * 6 + ["p3"] * 4
    assert simulated
