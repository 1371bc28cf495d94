"""A steps dataset made of a tinymath pool's own traces: cutting into lines, labelling by the generator's step values
(on replies the engine recorded and on hand-written solutions), the balanced choice, and the params' refusals."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, FIXTURES, REPO_ROOT
from tests.dvcproject import run_stage
from tracevote.core.config import load_params
from tracevote.core.errors import ConfigError, DataError
from tracevote.datasets.pool_steps import (
    GeneratorProblem,
    Solution,
    Trace,
    choose,
    cut_steps,
    derive_rows,
    first_wrong_step,
    generator_problems,
    label_trace,
)
from tracevote.datasets.problems import Problem
from tracevote.datasets.tinymath import first_error, generate

sys.path.insert(0, str(REPO_ROOT / "train"))  # the training folder is scripts, not a package
from tinymath_heldout import HELDOUT_DIFFICULTY

HELDOUT = REPO_ROOT / "src" / "tracevote" / "datasets" / "data" / "tinymath_heldout.jsonl"


def heldout(index: int) -> GeneratorProblem:
    row = json.loads(HELDOUT.read_text(encoding="utf-8").splitlines()[index])
    return GeneratorProblem(row["id"], row["problem"], row["answer"], tuple(step["value"] for step in row["steps"]))


def recorded(name: str) -> Trace:
    """The trace of a reply llama.cpp's server gave with the shipped model (tests/fixtures/llamacpp)."""
    choice = json.loads((FIXTURES / "llamacpp" / f"{name}.json").read_text(encoding="utf-8"))["reply"]["choices"][0]
    return Trace(0, choice["message"]["content"], choice["finish_reason"])


# Every recorded reply to held-out problem 0 (answer 14: 4, 4 - 2 = 2, 2 + 2 = 4, 4 + 10 = 14): the model took the
# distractor's 9 at its second line; a reply cut at max_tokens; an untrained model's noise, also cut off.
@pytest.mark.parametrize(("fixture", "expected"), [
    ("chat_top20", 1), ("chat_top3", 1), ("chat_n3", 1), ("chat_system", 1), ("chat_unknown_arg", 1),
    ("chat_no_logprobs", 1), ("chat_length", "truncated"), ("random_weights_chat_top20", "truncated"),
])
def test_recorded_replies_are_cut_into_lines_and_labelled(fixture: str, expected: int | str) -> None:
    trace = recorded(fixture)
    labelled = label_trace(heldout(0), trace)
    if isinstance(expected, str):
        assert labelled == expected
        return
    assert isinstance(labelled, Solution)
    assert labelled.steps == ("Kim starts with 4 apples.", "4 - 9 = 5.", "5 + 2 = 7.", "7 + 10 = 18.", "\\boxed{18}")
    assert labelled.label == expected and labelled.boxed == 18
    problem = generate(31, 1, HELDOUT_DIFFICULTY)[0]  # the held-out problem as the generator makes it
    assert problem.problem == heldout(0).problem and first_error(problem, trace.text) == expected


RIGHT = ["Kim starts with 4 apples.", "4 - 2 = 2.", "2 + 2 = 4.", "4 + 10 = 14.", "\\boxed{14}"]


# Hand-written solutions of held-out problem 0, each with its first wrong line.
@pytest.mark.parametrize(("lines", "label"), [
    (RIGHT, -1),
    (["Kim starts with 9 apples.", *RIGHT[1:]], 0),  # the start
    ([*RIGHT[:2], "2 + 2 = 5.", "5 + 10 = 15.", "\\boxed{15}"], 2),  # an addition
    ([*RIGHT[:3], "4 + 10 = 14.", "\\boxed{41}"], 4),  # every step right, another number boxed
    ([*RIGHT[:3], "\\boxed{4}"], 3),  # the box comes before the last step
    ([*RIGHT[:4], "14 - 3 = 11.", "\\boxed{11}"], 4),  # an operation the story has not
    ([*RIGHT[:2], "Kim finds more apples.", *RIGHT[2:]], -1),  # a line stating no value is no claim
    ([RIGHT[0], "Kim gives some away.", "4 - 9 = 5.", *RIGHT[2:]], 2),  # ... and does not shift the label
    ([*RIGHT[:4], "\\boxed{}"], 4),  # an empty box is a wrong final answer
    ([*RIGHT[:4], "\\boxed{-14}"], 4),
])
def test_hand_written_solutions_get_their_first_wrong_line(lines: list[str], label: int) -> None:
    trace = Trace(0, "\n".join(lines), "stop")
    solution = label_trace(heldout(0), trace)
    assert isinstance(solution, Solution) and solution.steps == tuple(lines) and solution.label == label
    assert first_wrong_step(heldout(0).values, 14, cut_steps(trace.text)) == label


@pytest.mark.parametrize(("text", "finish", "why"), [
    ("\n".join(RIGHT[:4]), "stop", "no box"),  # stopped without concluding
    ("\n".join([*RIGHT[:4], "The answer is 14."]), "stop", "no box"),
    ("", "stop", "no box"),
    ("\n".join(RIGHT), "length", "truncated"),  # cut off, even after its box
])
def test_a_trace_that_never_concludes_is_no_solution(text: str, finish: str, why: str) -> None:
    assert label_trace(heldout(0), Trace(0, text, finish)) == why


def test_the_generators_own_solutions_are_right_and_blank_lines_are_not_steps() -> None:
    for problem in generate(31, 50):
        values = tuple(step.value for step in problem.steps)
        generator = GeneratorProblem(problem.id, problem.problem, problem.answer, values)
        text = problem.solution.replace("\n", "\n\n")
        labelled = label_trace(generator, Trace(0, text, "stop"))
        assert isinstance(labelled, Solution) and labelled.label == -1 and len(labelled.steps) == len(values) + 1


def _solutions(labels: list[int]) -> list[Solution]:
    return [Solution("p", i, ("x", "\\boxed{1}"), label, 1) for i, label in enumerate(labels)]


@pytest.mark.parametrize(("labels", "cap", "right", "wrong"), [
    ([-1] * 5 + [1] * 5, 4, 2, 2),  # balanced where the pool has both
    ([-1] * 5 + [2], 4, 3, 1),  # the shorter side topped up from the other
    ([-1] + [0] * 5, 4, 1, 3),
    ([-1] * 3 + [1] * 3, 3, 1, 2),  # an odd cap: the extra one has an error
    ([-1] * 6, 4, 4, 0),
    ([-1, 1], 4, 1, 1),  # fewer than the cap: all
    ([-1] * 5 + [1] * 5, None, 5, 5),  # no cap: every one
])
def test_choice_is_balanced_capped_and_seeded(labels: list[int], cap: int | None, right: int, wrong: int) -> None:
    chosen = choose(_solutions(labels), cap, 0, "p")
    assert (sum(s.label == -1 for s in chosen), sum(s.label != -1 for s in chosen)) == (right, wrong)
    assert [s.sample_id for s in chosen] == sorted(s.sample_id for s in chosen)
    assert chosen == choose(_solutions(labels), cap, 0, "p")  # the same seed, the same draw


def test_another_seed_or_problem_draws_other_solutions() -> None:
    solutions = _solutions([-1] * 10 + [1] * 10)
    draws = {tuple(s.sample_id for s in choose(solutions, 4, seed, problem)) for seed in range(5) for problem in "pq"}
    assert len(draws) > 5


def test_derive_rows_keeps_each_distinct_text_once_in_processbench_layout() -> None:
    problem = heldout(0)
    wrong, right = recorded("chat_top20").text, "\n".join(RIGHT)
    traces = {problem.id: [Trace(0, wrong, "stop"), Trace(1, wrong, "stop"), Trace(2, right, "stop"),
                           Trace(3, "Kim starts", "length"), Trace(4, "\n".join(RIGHT[:3]), "stop")]}
    derived = derive_rows([problem], traces, task="tinymath", per_problem=4, seed=0, simulated=False)
    assert derived.dropped == {"duplicate": 1, "no box": 1, "truncated": 1} and derived.traces == 5
    assert [(row["id"], row["label"], row["answer_correct"]) for row in derived.rows] == [
        ("tinymath-0-s0", 1, False), ("tinymath-0-s2", -1, True)]
    assert derived.rows[1] | {"steps": None} == {
        "id": "tinymath-0-s2", "problem": problem.problem, "steps": None, "label": -1, "task": "tinymath",
        "problem_id": "tinymath-0", "sample_id": 2, "gold": 14, "boxed": 14, "answer_correct": True,
        "simulated": False}
    assert derived.summary() == ("5 traces: 1 duplicate, 1 no box, 1 truncated; 2 solutions (1 without an error, "
                                 "1 with one)")


def _normalized(rows: list[dict[str, Any]]) -> list[Problem]:
    return [Problem(row["id"], row["problem"], row["answer"]) for row in rows]


def test_rows_without_the_generators_steps_are_refused_naming_row_and_field() -> None:
    rows = [json.loads(line) for line in HELDOUT.read_text(encoding="utf-8").splitlines()[:3]]
    assert next(p.values for p in generator_problems(rows, _normalized(rows), "h.jsonl", "w")) == (4, 2, 4, 14)
    rows[1] = {k: v for k, v in rows[1].items() if k != "steps"}
    rows[2] = {**rows[2], "answer": 11}
    with pytest.raises(DataError) as error:
        generator_problems(rows, _normalized(rows), "h.jsonl", "datasets.own.source.pool (tinymath)")
    message = str(error.value)
    assert message.startswith("h.jsonl: 2 row(s) do not come from the tinymath generator, which datasets.own.source."
                              "pool (tinymath) needs")
    assert "row 2: field 'steps': expected the generator's steps, a list of {\"text\", \"value\"} with integer " \
           "values, got None" in message
    assert "row 3: its answer 11 is not its last step's value 10" in message


# The entry the issue names, on the tests' own params (the tinymath recipe is the pool dataset).
OWN = {"source": {"hf_dataset": None, "hf_config": "default", "hf_split": "test",
                  "api_url": "https://datasets-server.huggingface.co", "path": None, "pool": "tinymath",
                  "watch": "pools/tinymath.json"},
       "kind": "steps", "problem_key": "problem", "answer_key": "label", "id_key": "id", "answer_format": "integer"}


def params_file(tmp_path: Path, own: dict[str, Any], **datasets: dict[str, Any]) -> Path:
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["datasets"]["tinymath_own"] = own
    params["datasets"].update(datasets)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


def with_source(**fields: Any) -> dict[str, Any]:
    return {**OWN, "source": {**OWN["source"], **fields}}


def test_the_entry_loads(tmp_path: Path) -> None:
    source = load_params(params_file(tmp_path, OWN)).dataset("tinymath_own").source
    assert (source.pool, source.watch, source.per_problem, source.sample_seed) == (
        "tinymath", "pools/tinymath.json", 4, 0)


PROBLEMS_ENTRY = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))["datasets"]["tinymath"]


@pytest.mark.parametrize(("own", "extra", "line"), [
    (with_source(watch="stages/fetch.py"), {},
     "datasets.tinymath_own.source.watch: 'stages/fetch.py' must be 'pools/tinymath.json' (the manifest of the pool "
     "it reads, so that a changed pool marks fetch stale); set watch: pools/tinymath.json"),
    (with_source(path="inputs/own.jsonl"), {},
     "datasets.tinymath_own.source.path: 'inputs/own.jsonl' must be null when pool is set ('tinymath'): a dataset's "
     "rows come from one source"),
    (with_source(hf_dataset="Qwen/ProcessBench"), {},
     "datasets.tinymath_own.source.hf_dataset: 'Qwen/ProcessBench' must be null when pool is set ('tinymath')"),
    (with_source(pool="gsm", watch="pools/gsm.json"), {},
     "datasets.tinymath_own.source.pool: 'gsm' must be a key of datasets: ("),
    (with_source(pool="processbench_gsm8k", watch="pools/processbench_gsm8k.json"), {},
     "datasets.tinymath_own.source.pool: 'processbench_gsm8k' must be a dataset of kind problems read from a file or "
     "the hub, whose DeepConf pool holds the traces (processbench_gsm8k is kind steps)"),
    ({**OWN, "kind": "problems", "answer_key": "answer"}, {},
     "datasets.tinymath_own.kind: 'problems' must be steps: source.pool (tinymath) makes solutions labelled"),
    (with_source(per_problem=0), {}, "datasets.tinymath_own.source.per_problem: 0 must be >= 1"),
    (OWN, {"again": with_source(pool="tinymath_own", watch="pools/tinymath_own.json")},
     "datasets.again.source.pool: 'tinymath_own' must be a dataset of kind problems read from a file or the hub, "
     "whose DeepConf pool holds the traces (tinymath_own is kind steps, itself made of pool tinymath)"),
])
def test_a_bad_pool_source_is_refused_in_one_line(tmp_path: Path, own: dict[str, Any], extra: dict[str, Any],
                                                   line: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_params(params_file(tmp_path, own, **extra))
    assert line in str(error.value)
    assert PROBLEMS_ENTRY["kind"] == "problems"


def test_check_params_refuses_a_pool_file_without_the_generators_steps(tmp_path: Path) -> None:
    """The check_params stage reads a pool dataset's local file; the line names the file, row, field and value."""
    plain = tmp_path / "inputs" / "plain.jsonl"
    plain.parent.mkdir()
    plain.write_text(json.dumps({"id": "p1", "problem": "What is 2 + 2?", "answer": 4}) + "\n", encoding="utf-8")
    entry = {**PROBLEMS_ENTRY, "source": {**PROBLEMS_ENTRY["source"], "path": str(plain), "watch": str(plain)}}
    params_file(tmp_path, OWN, tinymath=entry)
    failed = run_stage(tmp_path, "check_params.py", "--params", "params.yaml", check=False)
    assert failed.returncode == 2 and "Traceback" not in failed.stderr
    assert failed.stderr.startswith(
        f"error: {plain}: 1 row(s) do not come from the tinymath generator, which datasets.tinymath_own.source.pool "
        f"(tinymath) needs (it labels each solution by the generator's step values):\n  row 1: field 'steps': "
        f"expected the generator's steps, a list of {{\"text\", \"value\"}} with integer values, got None")
    entry["source"] = {**entry["source"], "path": str(HELDOUT), "watch": str(HELDOUT)}
    params_file(tmp_path, OWN, tinymath=entry)
    assert run_stage(tmp_path, "check_params.py", "--params", "params.yaml").stdout.startswith(
        "check_params: params.yaml is valid")


def test_the_models_own_recorded_solutions_are_labelled_as_first_error_says() -> None:
    """800 replies of the shipped model (100 held-out problems x 8 seeds, temperature 0.6) recorded through llama.cpp's
    server by train/record_own_solutions.py: every one ends in a box, every label is first_error's, and a label of -1
    goes with a right answer but in 9 solutions that reach the gold through a wrong step."""
    fixture = json.loads((FIXTURES / "llamacpp" / "own_solutions.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in HELDOUT.read_text(encoding="utf-8").splitlines()]
    problems = {row["id"]: heldout(index) for index, row in enumerate(rows)}
    generated = {problem.id: problem for problem in generate(31, 100, HELDOUT_DIFFICULTY)}
    traces: dict[str, list[Trace]] = {}
    lucky = []
    for reply in fixture["replies"]:
        trace = Trace(reply["seed"], reply["content"], reply["finish_reason"])
        traces.setdefault(reply["problem_id"], []).append(trace)
        solution = label_trace(problems[reply["problem_id"]], trace)
        assert isinstance(solution, Solution)
        assert solution.label == first_error(generated[reply["problem_id"]], trace.text), reply
        if (solution.label == -1) != (solution.boxed == problems[reply["problem_id"]].answer):
            lucky.append(solution)
    assert len(fixture["replies"]) == 800 and len(lucky) == 9 and all(s.label >= 0 for s in lucky)
    derived = derive_rows(list(problems.values()), traces, task="tinymath", per_problem=4, seed=0, simulated=False)
    assert derived.summary() == "800 traces: 621 duplicate; 177 solutions (65 without an error, 112 with one)"
