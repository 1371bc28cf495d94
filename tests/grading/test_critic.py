"""The grading critic: reply parsing and clamping, which items it scores, the simulated critic, and its paid
calls on the ledger (kill -9 and resume, the cost cap, never asking twice) through the build_grading_critic
stage against the loopback simulated server."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT
from tests.dvcproject import model_overrides, run_stage
from tests.sim_servers import (
    final_state,
    kill_and_resume,
    ledger_in,
    requests_by_key,
    stored_under,
    watched_server,
)
from tests.stage_here import run_stage_here
from tracevote.cli.demo import deep_merge, local_dataset, write_params
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import SimConfig
from tracevote.core.errors import FatalAPIError
from tracevote.critique.critic_prompt import CRITIC, reasoning_digest
from tracevote.grading.accuracy import pair_by_id
from tracevote.grading.critic import (
    critic_calls,
    critic_decoding,
    critic_items,
    parse_score,
    reply_score,
)
from tracevote.grading.gold import GoldItem
from tracevote.grading.predictions import Prediction
from tracevote.sampling.backend import open_client
from tracevote.sampling.replies import paid_reply
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=120)
CONCURRENCY = 4
N_PROBLEMS = 40
CRITIC_DIR = Path("grading/critic/toy_run")


@pytest.mark.parametrize(("reply", "score"), [
    ('{"score": 4}', 4.0),
    ('Reasoning is fine.\n```json\n{"score": 5}\n```', 5.0),
    ('{"score": 2} on reflection {"score": 3}', 3.0),  # the last object with a score
    ('{"score": 3} and then {"note": "no score here"}', 3.0),
    ('{"score": 3.5}', 3.5),
    ('{"score": "4"}', 4.0),
    ('{"score": 9}', 5.0),  # clamped
    ('{"score": 0}', 1.0),
    ('{"score": -2.5}', 1.0),
    ('{"details": {"score": 2}, "score": 4}', 4.0),  # the outer object's
    ('{"note": "a } brace in text", "score": 2}', 2.0),
    ('I would give it a 4.', None),
    ('{"score": "high"}', None),
    ('{"score": true}', None),
    ('{"score": null}', None),
    ('{"score": 4', None),
    ('', None),
])
def test_parse_score(reply: str, score: float | None) -> None:
    assert parse_score(reply) == score


# (reply, its score read as a structured reply, read as free text): the schema's object alone is read first; any
# other reply falls back to the free-text reading; None is "no score", never a low one
@pytest.mark.parametrize(("reply", "structured", "free_text"), [
    ('{"score": 4}', 4.0, 4.0),
    ('{"score": 4.5}', 4.5, 4.5),
    (' {"score": 2}\n', 2.0, 2.0),
    ('{"score": 6}', 5.0, 5.0),  # the schema bounds nothing: clamped as text is
    ('{"score": 0}', 1.0, 1.0),
    ('Sure. {"score": 3}', 3.0, 3.0),  # an endpoint that ignored the format: read as text
    ('{"score": "4"}', 4.0, 4.0),  # not the schema's number: the text reading takes a numeric string
    ('{"score": 2, "why": "skips a step"}', 2.0, 2.0),
    ('{"result": {"score": 5}}', 5.0, 5.0),  # not the schema's object: the text reading finds the inner one
    ('{"score": null}', None, None),
    ('{"score": true}', None, None),
    ('I would give it a four.', None, None),
    ('', None, None),
])
def test_structured_replies_parse_first_and_fall_back_to_text(reply: str, structured: float | None,
                                                              free_text: float | None) -> None:
    assert reply_score(reply, structured=True) == structured
    assert reply_score(reply, structured=False) == parse_score(reply) == free_text


def test_a_structured_critic_call_carries_the_schema_and_the_simulator_answers_with_its_object() -> None:
    gold = [GoldItem(f"q{i}", f"problem {i}", str(i), f"solution {i}") for i in range(60)]
    predictions = [Prediction(f"q{i}", None, f"reasoning number {i}", "", i) for i in range(60)]
    items = critic_items(pair_by_id(gold, predictions), 60)
    calls = critic_calls(items, structured=True)
    assert {orjson.dumps(call.extra) for call in calls} == {orjson.dumps({"response_format": {
        "type": "json_schema", "json_schema": {"name": "critic_score", "strict": True, "schema": {
            "type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"],
            "additionalProperties": False}}}})}
    assert all(call.extra is None for call in critic_calls(items))
    assert critic_calls(items)[0].request_sha256 != calls[0].request_sha256  # a stored reply is checked against it
    params = load_params(FIXTURE_PARAMS)
    model = dataclasses.replace(params.endpoint_model("gpt-4o-mini"), backend="sim", sim=SIM)  # json_schema replies
    with open_client(model, critic_decoding(params), [], None, pool=params.pool, concurrency=4) as client:
        structured = [paid_reply(client, call, model.priced()).reply.text for call in calls]
        free = [paid_reply(client, call, model.priced()).reply.text for call in critic_calls(items)]
    objects = [orjson.loads(text) for text in structured]  # the whole reply is the object: no text around it
    assert all(set(value) == {"score"} and value["score"] in range(7) for value in objects)
    assert [reply_score(text, structured=True) for text in structured] == [
        min(max(float(value["score"]), 1.0), 5.0) for value in objects]
    assert not any(_is_json(text) for text in free)  # without the format: free text, as before
    # the fallback on the free-text replies: exactly their text reading, unparsable ones included
    assert [reply_score(text, structured=True) for text in free] == [parse_score(text) for text in free]
    assert None in [parse_score(text) for text in free]


def test_the_simulator_refuses_a_schema_openai_would_refuse() -> None:
    params = load_params(FIXTURE_PARAMS)
    model = dataclasses.replace(params.endpoint_model("gpt-4o-mini"), backend="sim", sim=SIM)
    loose = {"type": "json_schema", "json_schema": {"name": "critic_score", "strict": True, "schema": {
        "type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}}}
    with open_client(model, critic_decoding(params), [], None, pool=params.pool, concurrency=1) as client, \
            pytest.raises(FatalAPIError, match=r"HTTP 400.*'additionalProperties' is required"):
        client.reply([{"role": "user", "content": "Grade."}], call_key="q/0", kind=CRITIC,
                     extra={"response_format": loose})


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def test_critic_items_are_the_first_with_a_reference_and_a_prediction_in_gold_order() -> None:
    gold = [GoldItem(f"q{i}", f"problem {i}", str(i), None if i == 1 else f"solution {i}") for i in range(6)]
    predictions = [Prediction(f"q{i}", None, f"thinking {i}", "", i) for i in (5, 4, 1, 0)]  # q2, q3 missing
    items = critic_items(pair_by_id(gold, predictions), max_samples=2)
    assert [item.gold_id for item in items] == ["q0", "q4"]
    prompt = items[0].messages[0]["content"]
    assert "problem 0" in prompt and "solution 0" in prompt and "thinking 0" in prompt
    assert len({item.item_id for item in critic_items(pair_by_id(gold, predictions), 10)}) == 3


def test_the_simulated_critic_tracks_whether_the_reasoning_reached_the_gold() -> None:
    gold = [GoldItem(f"q{i}", f"problem {i}", str(i), f"solution {i}") for i in range(80)]
    predictions = [Prediction(f"q{i}", None, f"reasoning number {i}", "", i) for i in range(80)]
    items = critic_items(pair_by_id(gold, predictions), 80)
    reached = {reasoning_digest(f"reasoning number {i}"): i % 2 == 0 for i in range(80)}
    params = load_params(FIXTURE_PARAMS)
    model = dataclasses.replace(params.critic_model, backend="sim", sim=SIM)
    with open_client(model, critic_decoding(params), [], None, pool=params.pool, concurrency=4,
                     reached=reached) as client:
        replies = [client.reply(item.messages, call_key=f"{item.item_id}/0", kind=CRITIC)[0] for item in items]
    scores = [parse_score(reply.text) for reply in replies]
    reached_scores = [s for i, s in enumerate(scores) if i % 2 == 0 and s is not None]
    missed_scores = [s for i, s in enumerate(scores) if i % 2 == 1 and s is not None]
    assert min(reached_scores) >= 4 and max(missed_scores) <= 3  # out-of-range replies clamp to 5 and 1
    assert 0 < scores.count(None) < 20  # some unparsable, not most


# ---- the paid stage ----

def toy_project(root: Path, base_url: str, **critic: Any) -> Path:
    """A folder with params.yaml (the critic at `base_url`), a GSM8K-layout dataset `toy` normalized by the
    normalize stage, and a predictions file for it (every third prediction wrong)."""
    root.mkdir(parents=True)
    raw = root / "toy_raw.jsonl"
    raw.write_text("".join(json.dumps({"question": f"What is {i} + 7?", "answer": f"{i} + 7 = {i + 7}\n#### {i + 7}"})
                           + "\n" for i in range(N_PROBLEMS)))
    (root / "predictions").mkdir()
    (root / "predictions" / "toy.jsonl").write_text("".join(json.dumps(
        {"id": f"toy_test_{i}", "thinking": f"Adding 7 to {i} gives {i + 7 + (i % 3 == 0)}.",
         "content": f"#### {i + 7 + (i % 3 == 0)}"}) + "\n" for i in range(N_PROBLEMS)))
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), {
        **model_overrides(backend="openai", base_url=base_url, name="tracevote-sim", needs_key=False, extra_body={}),
        "grading": {"critic": {"enabled": True, "max_samples": N_PROBLEMS, "concurrency": CONCURRENCY, **critic}}})
    params["datasets"]["toy"] = local_dataset(raw, problem_key="question", answer_format="integer")
    params["grading"]["runs"] = {"toy_run": {"dataset": "toy", "predictions": "predictions/toy.jsonl"}}
    write_params(root / "params.yaml", params)
    run_stage_here(root, "normalize.py", "--dataset", "toy", "--raw", str(raw), "--out", "data/toy.jsonl")
    return root


def build_command() -> list[str]:
    return [sys.executable, str(REPO_ROOT / "stages" / "build_grading_critic.py"), "--run", "toy_run",
            "--gold", "data/toy.jsonl", "--critic", str(CRITIC_DIR)]


def build(root: Path, check: bool = True, *, as_process: bool = False):
    """The stage in this process; `as_process` for a claim about its process (its exit and stderr, a kill)."""
    return (run_stage if as_process else run_stage_here)(root, "build_grading_critic.py", *build_command()[2:],
                                                         check=check)


def grade(root: Path) -> dict[str, Any]:
    run_stage_here(root, "grade.py", "--run", "toy_run", "--gold", "data/toy.jsonl", "--critic", str(CRITIC_DIR),
              "--out", "grading/runs/toy_run.json", "--details", "grading/runs/toy_run.jsonl")
    return json.loads((root / "grading" / "runs" / "toy_run.json").read_text())


def test_the_critic_runs_once_and_the_grade_stage_reads_its_scores(tmp_path: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = toy_project(tmp_path / "toy", base_url)
        first = build(root)
        assert f"{N_PROBLEMS} of {N_PROBLEMS} critic replies missing" in first.stdout
        # a sim-server behind backend openai: the opening estimate says so before any request
        opening = next(line for line in first.stdout.splitlines() if "critic replies missing" in line)
        assert opening.endswith("(SIMULATED: nothing will be spent)")
        again = build(root)
        assert "no request sent" in again.stdout
        assert set(requests_by_key(base_url).values()) == {1}, "a critic call was requested twice"
    record = grade(root)
    assert (record["correct"], record["total"]) == (N_PROBLEMS - 14, N_PROBLEMS)  # i % 3 == 0 for 14 of 0..39
    assert record["critic_scored"] + record["critic_unparsable"] == N_PROBLEMS
    assert 1.0 <= record["critic_score"] <= 5.0
    assert record["simulated"] is True  # the sim server says so in its responses, and the ledger records it


def test_a_run_with_no_reference_solution_says_the_critic_scores_nothing(tmp_path: Path) -> None:
    # the demo pool's problems (and AIME's) carry only a final answer: nothing for the critic to compare with
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = toy_project(tmp_path / "toy", base_url)
        raw = root / "toy_raw.jsonl"
        raw.write_text("".join(json.dumps({"question": f"What is {i} + 7?", "answer": str(i + 7)}) + "\n"
                               for i in range(N_PROBLEMS)))
        run_stage_here(root, "normalize.py", "--dataset", "toy", "--raw", str(raw), "--out", "data/toy.jsonl")
        built = build(root)
        assert requests_by_key(base_url) == {}
    assert "holds all 0" not in built.stdout
    assert ("the critic has nothing to score in run toy_run: none of its predictions is of a gold item with a "
            "reference solution") in built.stdout
    record = grade(root)
    assert record["critic_score"] is None and record["total"] == N_PROBLEMS


def test_kill_at_random_moments_resumes_exactly(tmp_path: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        uninterrupted = toy_project(tmp_path / "uninterrupted", base_url)
        build(uninterrupted)
    total = len(stored_under(uninterrupted / CRITIC_DIR))
    assert total == N_PROBLEMS
    with watched_server(SIM) as slow:
        root = toy_project(tmp_path / "killed", slow.base_url)
        kill_and_resume(slow, build_command(), root, CRITIC_DIR, total=total, concurrency=CONCURRENCY, seed=3,
                        logs=tmp_path, finish=lambda: build(root, as_process=True))
    killed_ledger, whole_ledger = ledger_in(root / CRITIC_DIR), ledger_in(uninterrupted / CRITIC_DIR)
    assert killed_ledger is not None and whole_ledger is not None
    assert final_state(killed_ledger.root) == final_state(whole_ledger.root)
    assert grade(root) == grade(uninterrupted)


def test_the_cost_cap_refuses_before_any_request(tmp_path: Path) -> None:
    with running_server(SimModel(SIM), parse_faults("")) as base_url:
        root = toy_project(tmp_path / "capped", base_url, max_cost_usd=0.000001)
        refused = build(root, check=False, as_process=True)
        assert requests_by_key(base_url) == Counter()
    assert refused.returncode == 2 and "grading.critic.max_cost_usd" in refused.stderr
