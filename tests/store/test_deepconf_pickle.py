"""`pool import --format deepconf-pickle`: the official offline runs' pickles become confidence-only samples;
a pickle that would call a function is refused before anything runs or is written."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tracevote.cli.main import main
from tracevote.core.errors import DataError
from tracevote.datasets.problems import Problem
from tracevote.store.deepconf_pickle import safe_load
from tracevote.store.pool import Pool

PROBLEMS = [Problem("p-1", "What is 3+4?", 7), Problem("p-2", "What is 2+2?", 4)]


def trace(answer: int, confs: list[float], num_tokens: int | None = None) -> dict[str, Any]:
    """One entry of `all_traces`, as deepconf-offline.py's process_output_offline builds it."""
    text = f"... so the answer is \\boxed{{{answer}}}"
    n_tokens = len(confs) if num_tokens is None else num_tokens
    return {"stop_reason": "stop", "text": text, "token_ids": np.arange(n_tokens, dtype=np.int64),
            "num_tokens": n_tokens, "confs": confs,
            "extracted_answer": str(answer), "is_correct": np.bool_(answer == 7)}


def trace_with(**changes: Any) -> dict[str, Any]:
    """A good two-confidence trace with `changes` applied (None removes a field)."""
    fields = {**trace(7, [1.0, 2.0]), **changes}
    return {key: value for key, value in fields.items() if value is not None}


def write_run(folder: Path, qid: int, rid: int, traces: list[dict[str, Any]], gold: str) -> Path:
    """A pickle in the official layout and file name (deepconf-offline.py's problem_result)."""
    folder.mkdir(parents=True, exist_ok=True)
    result = {"question_id": qid, "run_id": str(rid), "question": "q", "ground_truth": gold, "all_traces": traces,
              "voted_answer": traces[0]["extracted_answer"], "is_voted_correct": True, "accuracy": 0.5,
              "token_stats": {"total_tokens": sum(t["num_tokens"] for t in traces if type(t.get("num_tokens")) is int)},
              "config": {"model_path": MODEL, "window_size": 2048},
              "timestamp": "2025-08-20T10:00:00"}
    path = folder / f"deepconf_simple_qid{qid}_rid{rid}_20250820_10000{rid}.pkl"
    path.write_bytes(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    return path


class CallsAFunction:
    """What a malicious pickle carries: unpickling it would run os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


MODEL = "deepseek-ai/DeepSeek-R1-0528-Qwen3-8B"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tests' params with the pool endpoint's model name set to the official runs' model; the CLI runs in
    this folder."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text())
    params["endpoints"]["deepseek"]["name"] = MODEL
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p.to_record()) + "\n" for p in PROBLEMS))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def import_argv(folder: str = "outputs") -> list[str]:
    return ["pool", "import", "--format", "deepconf-pickle", folder, "--problems", "problems.jsonl"]


def imported_pool(project: Path) -> Pool:
    roots = list((project / "pools" / "aime_2025").glob("*/pool.json"))
    assert len(roots) == 1 and roots[0].parent.name.startswith(MODEL.replace("/", "-"))
    return Pool(roots[0].parent)


def test_offline_pickles_become_confidence_only_samples(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = project / "outputs"
    write_run(outputs, 0, 1, [trace(7, [1.5, 2.25]), trace(8, [0.5])], gold="7")
    write_run(outputs, 0, 0, [trace(7, [3.0, 3.5, 4.0])], gold="7")
    write_run(outputs, 1, 0, [trace(4, [2.0], num_tokens=3)], gold="4")
    assert main(import_argv()) == 0
    out = capsys.readouterr().out
    assert "pool import: 3 pickles, 4 traces read, 4 stored, 0 already" in out
    assert "1 with fewer confidences than tokens" in out
    pool = imported_pool(project)
    first = pool.read_problem("p-1", 3)
    # run 0 comes first: sample 0 is its trace, then run 1's two traces
    assert first.sample_ids.tolist() == [0, 1, 2] and first.offsets.tolist() == [0, 3, 5, 6]
    assert first.token_confidence.tolist() == [3.0, 3.5, 4.0, 1.5, 2.25, 0.5]
    assert [c.boxed for c in first.candidates] == [7, 7, 8]  # re-extracted from the text
    second = pool.read_problem("p-2", 1)
    assert second.offsets.tolist() == [0, 3] and np.isnan(second.token_confidence[1:]).all()

    assert main(import_argv()) == 0  # the same files again: nothing new
    assert "0 stored, 4 already" in capsys.readouterr().out


def test_a_pickle_that_calls_a_function_is_refused_and_nothing_runs(project: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    outputs = project / "outputs"
    write_run(outputs, 0, 0, [trace(7, [1.0])], gold="7")
    marker = project / "pwned"
    malicious = write_run(outputs, 1, 0, [trace(4, [1.0])], gold="4")
    malicious.write_bytes(pickle.dumps({"question_id": 1, "all_traces": [CallsAFunction(marker)]}))
    with pytest.raises(SystemExit) as exit_:
        main(import_argv())
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{malicious.relative_to(project)}: refused to unpickle {os.system.__module__}.system" in err
    assert "only plain containers, numbers, strings and numpy arrays are admitted" in err
    assert not marker.exists()  # the function never ran
    assert not (project / "pools").exists()  # and nothing was written, not even the good file's samples


def test_the_restricted_unpickler_admits_numpy_and_containers(tmp_path: Path) -> None:
    data = {"a": [1, 2.5, "x", None, True], "b": (np.arange(3, dtype=np.float32), np.float64(2.5)),
            "c": {1, 2}, "d": np.array([[1, 2], [3, 4]])}
    path = tmp_path / "ok.pkl"
    for protocol in (2, 4, 5):
        path.write_bytes(pickle.dumps(data, protocol=protocol))
        loaded = safe_load(path)
        assert loaded["a"] == data["a"] and loaded["c"] == {1, 2}
        np.testing.assert_array_equal(loaded["d"], data["d"])
        assert loaded["b"][1] == 2.5 and loaded["b"][0].dtype == np.float32
    path.write_bytes(pickle.dumps(Problem("p", "q", 1)))
    with pytest.raises(DataError, match=r"refused to unpickle tracevote\.datasets\.problems\.Problem"):
        safe_load(path)


@pytest.mark.parametrize(("setup", "message"), [
    (lambda out: write_run(out, 0, 0, [trace(7, [1.0])], gold="8"),
     "ground_truth '8' is not the answer of problem p-1 (7)"),
    (lambda out: write_run(out, 5, 0, [trace(7, [1.0])], gold="7"), "question_id 5 is outside the dataset's 2"),
    (lambda out: write_run(out, 0, 0, [trace(7, [1.0, float("nan")])], gold="7"),
     "all_traces[0]: field 'confs': expected a flat list of finite numbers"),
    (lambda out: (out.mkdir(), (out / "deepconf_qid0_rid0_20250820_100000.pkl").write_bytes(b"x")),
     "1 are online runs, whose traces keep no per-token confidences"),
    # issue 22 item 3: a count is bounded by the data the pickle carries, before anything is allocated for it
    (lambda out: write_run(out, 0, 0, [trace_with(num_tokens=10**11)], gold="7"),
     "all_traces[0]: field 'num_tokens': 100000000000 must be an integer in 2..2 (len(confs) 2, len(token_ids) 2)"),
    (lambda out: write_run(out, 0, 0, [trace_with(num_tokens=np.int64(10**11), token_ids=None)], gold="7"),
     "field 'num_tokens': 100000000000 must be an integer in 2..2 (len(confs) 2, no token_ids)"),
    (lambda out: write_run(out, 0, 0, [trace_with(num_tokens=3)], gold="7"),
     "field 'num_tokens': 3 must be an integer in 2..2"),
    (lambda out: write_run(out, 0, 0, [trace_with(num_tokens=1)], gold="7"),
     "field 'num_tokens': 1 must be an integer in 2..2"),
    (lambda out: write_run(out, 0, 0, [trace_with(num_tokens="2")], gold="7"),
     "field 'num_tokens': '2' must be an integer in 2..2"),
    (lambda out: write_run(out, 0, 0, [trace_with(num_tokens=True)], gold="7"), "field 'num_tokens': True must be"),
    (lambda out: write_run(out, 0, 0, [trace_with(token_ids=10**11)], gold="7"),
     "all_traces[0]: field 'token_ids': expected a flat list of token ids, got int"),
    (lambda out: write_run(out, 0, 0, [trace_with(token_ids=np.zeros((2, 2)))], gold="7"),
     "field 'token_ids': expected a flat list of token ids, got ndarray"),
    (lambda out: write_run(out, 0, 0, [trace_with(confs=[[1.0], [2.0]])], gold="7"),
     "all_traces[0]: field 'confs': expected a flat list of finite numbers"),
    (lambda out: write_run(out, 0, 0, [trace_with(confs={"a": 1})], gold="7"), "field 'confs': expected a"),
    (lambda out: write_run(out, 0, 0, [trace_with(text=None)], gold="7"),
     "all_traces[0]: field 'text': expected a string, got NoneType"),
    # one trace repeated by reference: a ~0.3 MB file naming 10**8 tokens
    (lambda out: write_run(out, 0, 0, [trace(7, [1.0] * 1000)] * 100_000, gold="7"),
     "the traces so far claim more tokens and text than the file's bytes can hold (one trace repeated by reference?)"),
    (lambda out: write_run(out, 0, 0, [trace(7, [1.0])], gold="7").write_bytes(pickle.dumps(
        {"question_id": 0, "ground_truth": "7", "all_traces": []})), "field 'all_traces' is empty"),
])
def test_bad_pickles_are_refused_by_name(project: Path, capsys: pytest.CaptureFixture[str], setup: Any,
                                         message: str) -> None:
    setup(project / "outputs")
    with pytest.raises(SystemExit):
        main(import_argv())
    assert message in capsys.readouterr().err
    assert not (project / "pools").exists()


def test_a_run_of_another_model_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_run(project / "outputs", 0, 0, [trace(7, [1.0])], gold="7")
    data = safe_load(path)
    data["config"]["model_path"] = "Qwen/QwQ-32B"
    path.write_bytes(pickle.dumps(data))
    with pytest.raises(SystemExit):
        main(import_argv())
    assert f"config.model_path is 'Qwen/QwQ-32B', but the pool is for '{MODEL}'" in capsys.readouterr().err


def test_pickles_are_refused_by_a_simulated_setting_and_nothing_is_created(project: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    write_run(project / "outputs", 0, 0, [trace(7, [1.0])], gold="7")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["model"]["backend"] = "sim"
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(SystemExit):
        main(import_argv())
    assert "model.backend is sim, but the official runs' pickles hold a real model's traces" in capsys.readouterr().err
    assert not (project / "pools").exists()
