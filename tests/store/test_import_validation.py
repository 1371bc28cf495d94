"""`pool import` checks the whole file, lists every bad line in one run, and keeps sample ids in 0..n_pool-1."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PARAMS
from tests.store.test_framing_codec import make_sample
from tracevote.cli.main import main
from tracevote.core.errors import DataError
from tracevote.datasets.problems import Problem
from tracevote.store.interchange import MAX_LISTED_BAD_LINES, CheckedFile, to_json_line, validate_file

PROBLEM_IDS = {"p-1", "p-2"}
FIXTURE_N_POOL = 512  # pool.n_pool in tests/fixtures/params.yaml


def good_line(sample_id: int = 0) -> bytes:
    return to_json_line(make_sample(n=3, k=2, sample_id=sample_id), simulated=False)


def bad_line(base_id: int = 0, **changes: object) -> bytes:
    record = json.loads(good_line(sample_id=base_id))
    record.update(changes)
    return json.dumps(record).encode() + b"\n"


def test_every_bad_line_is_listed_with_its_number_field_and_value(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"".join([
        good_line(0),
        bad_line(sample_id=9999),
        b"\n",  # blank lines are skipped but still counted, so numbers match an editor's
        b"{oops\n",
        good_line(1),
        bad_line(problem_id="p-9", base_id=2),
        bad_line(token_logprobs=[-0.1, "x", -0.3], base_id=3),
        good_line(1),
    ]))
    with pytest.raises(DataError) as error:
        validate_file(path, PROBLEM_IDS, n_pool=64)
    lines = str(error.value).splitlines()
    assert lines[0] == f"{path}: 5 bad lines, nothing imported:"
    expected = [
        "line 2: field 'sample_id': 9999 is outside 0..63 (pool.n_pool is 64; --allow-any-sample-id admits it)",
        "line 4: not valid JSON",
        "line 6: field 'problem_id': 'p-9' is not in the dataset (2 problems)",
        "line 7: field 'token_logprobs': expected numbers or null",
        "line 8: duplicate sample p-1/1 (first on line 5)",
    ]
    assert len(lines) == 1 + len(expected)
    for line, start in zip(lines[1:], expected, strict=True):
        assert line.strip().startswith(start)


def test_a_long_listing_stops_at_the_cap_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"{oops\n" * (MAX_LISTED_BAD_LINES + 7))
    with pytest.raises(DataError) as error:
        validate_file(path, PROBLEM_IDS, n_pool=64)
    lines = str(error.value).splitlines()
    assert lines[0].endswith(f"{MAX_LISTED_BAD_LINES + 7} bad lines, nothing imported:")
    assert len(lines) == 1 + MAX_LISTED_BAD_LINES + 1
    assert lines[-2].strip().startswith(f"line {MAX_LISTED_BAD_LINES}: ")
    assert lines[-1] == "  ... and 7 more"


@pytest.mark.parametrize(("n_pool", "valid"), [(64, False), (10_000, True), (None, True)])
def test_sample_ids_must_lie_below_n_pool_unless_any_id_is_allowed(tmp_path: Path, n_pool: int | None,
                                                                   valid: bool) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(good_line(0) + bad_line(sample_id=9999))
    if valid:
        assert validate_file(path, PROBLEM_IDS, n_pool=n_pool) == CheckedFile(samples=2, simulated=False)
    else:
        with pytest.raises(DataError, match=re.escape("line 2: field 'sample_id': 9999 is outside 0..63")):
            validate_file(path, PROBLEM_IDS, n_pool=n_pool)


def test_a_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=re.escape("samples.jsonl: cannot read it")):
        validate_file(tmp_path / "samples.jsonl", PROBLEM_IDS, n_pool=64)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the tests' params and two problems; the CLI runs in it."""
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    problems = [Problem("p-1", "What is 3+4?", 7), Problem("p-2", "What is 2+2?", 4)]
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p.to_record()) + "\n" for p in problems))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_refuses_an_out_of_range_id_and_writes_nothing(project: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (project / "samples.jsonl").write_bytes(good_line(0) + bad_line(sample_id=FIXTURE_N_POOL))
    with pytest.raises(SystemExit) as exit_:
        main(["pool", "import", "samples.jsonl", "--problems", "problems.jsonl"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: samples.jsonl: 1 bad line, nothing imported:\n")
    assert (f"line 2: field 'sample_id': {FIXTURE_N_POOL} is outside 0..{FIXTURE_N_POOL - 1} "
            f"(pool.n_pool is {FIXTURE_N_POOL}; --allow-any-sample-id admits it)") in err
    assert not (project / "pools").exists()


def test_cli_admits_any_id_with_the_flag(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "samples.jsonl").write_bytes(good_line(0) + bad_line(sample_id=9999))
    argv = ["pool", "import", "samples.jsonl", "--problems", "problems.jsonl", "--allow-any-sample-id"]
    assert main(argv) == 0
    assert "pool import: 2 samples read, 2 stored, 0 already in pools/aime_2025/" in capsys.readouterr().out


# issue 22 items 3 and 5: every count and length in a line is checked against the data the line carries, and every
# malformed structure is a bad line naming its field and value (the good line has 3 tokens and 2 top entries each)
BAD_FIELDS = [
    ({"token_logprobs": [-0.1, -0.2]}, "field 'token_logprobs': 2 values for 3 tokens"),
    ({"token_logprobs": [[-0.1], [-0.2], [-0.3]]}, "field 'token_logprobs': expected numbers or null, got [-0.1]"),
    ({"token_logprobs": [-0.1, "-0.2", -0.3]}, "field 'token_logprobs': expected numbers or null, got '-0.2'"),
    ({"token_logprobs": [-0.1, True, -0.3]}, "field 'token_logprobs': expected numbers or null, got True"),
    ({"token_logprobs": None}, "field 'token_logprobs': expected list, got None"),
    ({"top_logprobs": [[-0.1]] * 4}, "field 'top_logprobs': expected 3 lists (one per token)"),
    ({"top_logprobs": [[-0.1], [-0.2], 5]}, "field 'top_logprobs': expected 3 lists (one per token)"),
    ({"top_logprobs": [[-0.1], [-0.2], [None] * 10_000]},
     "field 'top_logprobs': token 2 has 10000 entries, more than 100"),
    ({"top_logprobs": [[-0.1], [-0.2], [{"x": 1}]]}, "field 'top_logprobs': expected numbers or null, got {'x': 1}"),
    ({"token_confidence": [1.0]}, "field 'token_confidence': 1 values for 3 tokens"),
    ({"top_tokens": [["a"], ["b"]]}, "field 'top_tokens': expected 3 lists of strings (one per token)"),
    ({"top_tokens": [["a"], ["b"], [7]]}, "field 'top_tokens': expected 3 lists of strings (one per token)"),
    ({"tokens": "abc"}, "field 'tokens': expected list, got 'abc'"),
    ({"tokens": ["a", 1, "c"]}, "field 'tokens': every token must be a string"),
    ({"usage": {"completion_tokens": 10**11}},
     "field 'usage.completion_tokens': expected an integer in 0..2**32-1, got 100000000000"),
    ({"usage": {"prompt_tokens": -1}}, "field 'usage.prompt_tokens': expected an integer in 0..2**32-1, got -1"),
    ({"usage": [1]}, "field 'usage': expected an object, got [1]"),
    ({"sample_id": 2**40}, "field 'sample_id': 1099511627776 is not in 0..2**32-1"),
    ({"sample_id": 1e23}, "field 'sample_id': expected int, got 1e+23"),
    ({"latency_s": -1.5}, "field 'latency_s': expected a finite number >= 0, got -1.5"),
    ({"finish_reason": {"a": 1}}, "field 'finish_reason': expected text or null, got {'a': 1}"),
    ({"simulated": "false"}, "field 'simulated': expected true or false, got 'false'"),
    ({"problem_id": "x" * 10_000}, "field 'problem_id': '" + "x" * 79 + " is not in the dataset (2 problems)"),
    ({"problem_id": 7}, "field 'problem_id': expected str, got 7"),
]


@pytest.mark.parametrize(("changes", "says"), BAD_FIELDS)
def test_a_malformed_or_oversized_field_is_a_bad_line(tmp_path: Path, changes: dict, says: str) -> None:
    path = tmp_path / "samples.jsonl"
    record = json.loads(good_line(1))
    record.update(changes)
    path.write_bytes(good_line(0) + json.dumps(record).encode() + b"\n")
    with pytest.raises(DataError) as error:
        validate_file(path, PROBLEM_IDS, n_pool=None)
    lines = str(error.value).splitlines()
    assert lines == [f"{path}: 1 bad line, nothing imported:", f"  line 2: {says}"]


def test_a_line_longer_than_the_bound_is_refused_before_it_is_read_whole(tmp_path: Path) -> None:
    from tracevote.store.interchange import numbered_lines

    path = tmp_path / "samples.jsonl"
    path.write_bytes(good_line(0) + b"[" + b" " * 5000 + b"]\n")
    with pytest.raises(DataError, match=re.escape(f"{path}: line 2: longer than 4,096 bytes, the most one sample's "
                                                  "line may hold")):
        list(numbered_lines(path, max_line_bytes=4096))
    assert [number for number, _ in numbered_lines(path, max_line_bytes=8192)] == [1, 2]


@pytest.mark.parametrize("content", [b"", b"\n", b"  \n\n\t\n"], ids=["empty", "newline", "blank"])
def test_an_empty_file_is_refused_and_nothing_is_created(project: Path, capsys: pytest.CaptureFixture[str],
                                                          content: bytes) -> None:
    (project / "samples.jsonl").write_bytes(content)
    with pytest.raises(SystemExit) as exit_:
        main(["pool", "import", "samples.jsonl", "--problems", "problems.jsonl"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == ("error: samples.jsonl: no samples, nothing imported (expected one JSON object per line: "
                   '{"problem_id", "sample_id", "text", "tokens", "token_logprobs", "top_logprobs" or '
                   '"token_confidence", ...})\n')
    assert not (project / "pools").exists()


def test_an_empty_file_leaves_an_existing_pool_unchanged(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "samples.jsonl").write_bytes(good_line(0) + good_line(1))
    assert main(["pool", "import", "samples.jsonl", "--problems", "problems.jsonl"]) == 0
    before = {path: path.read_bytes() for path in (project / "pools").rglob("*") if path.is_file()}
    (project / "empty.jsonl").write_bytes(b"")
    with pytest.raises(SystemExit):
        main(["pool", "import", "empty.jsonl", "--problems", "problems.jsonl"])
    after = {path: path.read_bytes() for path in (project / "pools").rglob("*") if path.is_file()}
    assert after == before and len(before) >= 2


def test_a_new_pool_dir_is_created_with_the_params_setting(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: `pool import --pool-dir <new folder>` refused with "not a pool" and no hint."""
    (project / "samples.jsonl").write_bytes(good_line(0) + good_line(1))
    assert main(["pool", "import", "samples.jsonl", "--problems", "problems.jsonl", "--pool-dir", "new/pool"]) == 0
    captured = capsys.readouterr()
    assert "pool import: creating a new pool in new/pool (the params file's setting: model" in captured.err
    assert "pool import: 2 samples read, 2 stored, 0 already in new/pool" in captured.out
    assert main(["pool", "import", "samples.jsonl", "--problems", "problems.jsonl", "--pool-dir", "new/pool"]) == 0
    assert "2 samples read, 0 stored, 2 already in new/pool" in capsys.readouterr().out


@pytest.mark.parametrize(("action", "says"), [
    (["import", "samples.jsonl", "--problems", "problems.jsonl"],
     "`pool import` creates a pool in a new or empty folder (with the params file's setting), so name one"),
    (["export"], "`python -m tracevote pool status` lists the pools of a dataset; name one of them"),
])
def test_a_folder_that_is_not_a_pool_is_refused_saying_how(project: Path, capsys: pytest.CaptureFixture[str],
                                                          action: list[str], says: str) -> None:
    (project / "samples.jsonl").write_bytes(good_line(0))
    (project / "notes").mkdir()
    (project / "notes" / "todo.txt").write_text("not a pool")
    with pytest.raises(SystemExit) as exit_:
        main(["pool", *action, "--pool-dir", "notes"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"error: --pool-dir notes: not a pool (no pool.json) and not an empty folder; "
                                       f"{says}, or leave out --pool-dir to use pools/<dataset>/<the setting "
                                       f"params.yaml describes>\n")
    assert sorted(path.name for path in (project / "notes").iterdir()) == ["todo.txt"]
