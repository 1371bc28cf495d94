"""pool export / pool import: the JSON-lines interchange format round-trips and rejects bad input."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.conftest import FIXTURES
from tests.store.test_framing_codec import make_sample
from tracevote.core.config import load_params
from tracevote.core.errors import DataError
from tracevote.datasets.problems import Problem
from tracevote.sampling.prompts import setting_messages
from tracevote.store import codec
from tracevote.store.interchange import export_pool, import_file, parse_line, to_json_line
from tracevote.store.logprobs import top_error_bound
from tracevote.store.pool import Pool, Setting
from tracevote.store.records import Sample

PROBLEMS = [Problem("p-1", "What is 3+4?", 7), Problem("p-2", "What is 2+2?", 4)]
N_POOL = 8


@pytest.fixture
def pool(tmp_path: Path) -> Pool:
    setting = Setting.from_params(load_params(FIXTURES / "params.yaml"))
    pool = Pool.open_or_create(tmp_path / "pools", setting, simulated=False)
    pool.register(setting_messages(PROBLEMS, setting))
    return pool


def samples_file(tmp_path: Path, samples: list[Sample], *, simulated: bool = False) -> Path:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"".join(to_json_line(s, simulated=simulated) for s in samples))
    return path


def test_export_then_import_round_trips(tmp_path: Path, pool: Pool) -> None:
    samples = [make_sample(sample_id=i, seed=i) for i in range(3)]
    count = import_file(samples_file(tmp_path, samples), pool, PROBLEMS, keep_top_logprobs=True, n_pool=N_POOL)
    assert (count.read, count.stored, count.already_stored) == (3, 3, 0)

    out = io.BytesIO()
    assert export_pool(pool, ["p-1", "p-2"], out) == 3
    lines = out.getvalue().splitlines()
    back = [parse_line(line, "export")[0] for line in lines]
    for original, copy in zip(samples, back, strict=True):
        assert (copy.problem_id, copy.sample_id, copy.text, copy.tokens) == (
            original.problem_id, original.sample_id, original.text, original.tokens)
        bound = top_error_bound(original.top_logprobs, original.token_logprobs)
        present = ~np.isnan(original.top_logprobs)
        assert np.array_equal(~np.isnan(copy.top_logprobs), present)
        assert (np.abs(copy.top_logprobs - original.top_logprobs) <= bound)[present].all()
    first = json.loads(lines[0])
    assert first["top_logprobs"][0][-1] is None  # absent entries are exported as null
    assert first["answer"] == 7 and first["simulated"] is False


def test_export_lists_a_problems_samples_in_sample_id_order_whatever_order_they_were_stored_in(
        tmp_path: Path, pool: Pool) -> None:
    samples = [make_sample(sample_id=i, seed=i) for i in (2, 0, 1)]  # as concurrent calls finish
    import_file(samples_file(tmp_path, samples), pool, PROBLEMS, keep_top_logprobs=False, n_pool=N_POOL)
    out = io.BytesIO()
    export_pool(pool, ["p-1"], out, fields=["sample_id"])
    assert [json.loads(line)["sample_id"] for line in out.getvalue().splitlines()] == [0, 1, 2]


def test_import_skips_samples_already_stored_and_marks_simulated(tmp_path: Path, pool: Pool) -> None:
    path = samples_file(tmp_path, [make_sample(sample_id=i) for i in range(2)], simulated=True)
    import_file(path, pool, PROBLEMS, keep_top_logprobs=True, n_pool=N_POOL)
    again = import_file(path, pool, PROBLEMS, keep_top_logprobs=True, n_pool=N_POOL)
    assert (again.stored, again.already_stored, again.simulated) == (0, 2, True)
    assert Pool(pool.root).simulated


def test_import_without_top_k_keeps_confidence(tmp_path: Path, pool: Pool) -> None:
    import_file(samples_file(tmp_path, [make_sample()]), pool, PROBLEMS, keep_top_logprobs=False, n_pool=N_POOL)
    [stored] = list(pool.iter_samples("p-1"))
    assert stored.top_logprobs is None and stored.token_confidence is not None
    traces = pool.read_problem("p-1", n_pool=1)
    np.testing.assert_allclose(traces.token_confidence, stored.token_confidence, rtol=1e-6)


def line_with(**changes: object) -> bytes:
    record = json.loads(to_json_line(make_sample(n=3, k=2), simulated=False))
    record.update(changes)
    return json.dumps(record).encode()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b"{oops", "line 2: not valid JSON"),
        (b"[1, 2]", "line 2: expected an object, got list"),
        (line_with(tokens="abc"), "line 2: field 'tokens': expected list"),
        (line_with(sample_id=-1), "line 2: field 'sample_id': -1 is not in"),
        (line_with(token_logprobs=[-0.1, -0.2]), "line 2: field 'token_logprobs': 2 values for 3 tokens"),
        (line_with(top_logprobs=[[-0.1], [-0.2]]), "line 2: field 'top_logprobs': expected 3 lists"),
        (line_with(token_logprobs=[-0.1, "x", -0.3]), "line 2: field 'token_logprobs': expected numbers or null"),
        (line_with(problem_id="p-9"), "line 2: field 'problem_id': 'p-9' is not in the dataset"),
        (line_with(sample_id=0), "line 2: duplicate sample p-1/0 (first on line 1)"),
        (line_with(sample_id=8), "line 2: field 'sample_id': 8 is outside 0..7"),
        (line_with(usage={"prompt_tokens": "many"}), "line 2: field 'usage.prompt_tokens'"),
        (line_with(reasoning=["so"]), "line 2: field 'reasoning': expected str"),
    ],
)
def test_bad_lines_name_the_line_and_field_and_write_nothing(tmp_path: Path, pool: Pool, line: bytes,
                                                             message: str) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(to_json_line(make_sample(n=3, k=2), simulated=False) + line + b"\n")
    with pytest.raises(DataError) as error:
        import_file(path, pool, PROBLEMS, keep_top_logprobs=True, n_pool=N_POOL)
    assert str(path) in str(error.value) and message in str(error.value)
    assert pool.stored_ids("p-1") == set()


def test_sentinels_in_the_interchange_are_absent() -> None:
    record = json.loads(line_with(top_logprobs=[[0.0, -9999.0], [-0.5, None], [-0.1, -1e9]]))
    sample, _ = parse_line(json.dumps(record).encode(), "x")
    assert np.isnan(sample.top_logprobs[:, 1]).all()
    assert codec.decode(codec.encode(sample)).blobs["top_logprobs_kmajor"].shape == (2, 3)


def test_a_simulated_sample_says_so_whatever_fields_are_asked_for() -> None:
    sample = make_sample(sample_id=0, seed=0)
    assert orjson.loads(to_json_line(sample, simulated=True, fields=("problem_id", "answer"))) == {
        "problem_id": sample.problem_id, "answer": sample.answer, "simulated": True}
    assert orjson.loads(to_json_line(sample, simulated=False, fields=("problem_id",))) == {
        "problem_id": sample.problem_id}


def test_a_split_replys_reasoning_round_trips_and_decides_an_answer_its_content_lacks() -> None:
    sample = dataclasses.replace(make_sample(sample_id=0, seed=0), text="", reasoning="so \\boxed{42}")
    line = to_json_line(sample, simulated=False)
    back, _ = parse_line(line, "x")
    assert orjson.loads(line)["reasoning"] == back.reasoning == "so \\boxed{42}" and back.answer == 42
    assert "reasoning" not in orjson.loads(to_json_line(make_sample(sample_id=0, seed=0), simulated=False))
