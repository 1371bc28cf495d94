"""What a stage reads of params.yaml is recorded (recording_reads), and compared with what it declares in dvc.yaml
(declaration_problems): the end-to-end comparison over every stage is in tests/test_docs_commands.py."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from tests.conftest import FIXTURE_PARAMS
from tracevote.core.config import load_params
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.reads import recording_reads
from tracevote.core.stage_params import covers, declaration_problems


def test_reads_after_loading_are_recorded_and_validation_is_not() -> None:
    with recording_reads() as reads:
        params = load_params(FIXTURE_PARAMS)
        assert reads == set()  # load_params validated every key: no read of the program's
        assert params.decoding.temperature > 0
        runs = list(params.grading.runs)  # listing a named collection reads its names
        assert params.grading.runs[runs[0]].dataset  # an entry's own keys, by its path
        assert hash(params.eval) and params.eval == params.eval and repr(params.confidence)  # none reads
    assert reads == {"decoding.temperature", "grading.runs", f"grading.runs.{runs[0]}.dataset"}


def test_a_recorded_config_stays_a_config() -> None:
    with recording_reads() as reads:
        decoding = load_params(FIXTURE_PARAMS).decoding
        copy = dataclasses.replace(decoding, temperature=0.1)  # a copy made in the program notes nothing
        assert isinstance(copy, DecodingConfig) and copy.temperature == 0.1
        sent = pickle.loads(pickle.dumps(decoding))  # to a worker process: a plain config
        assert type(sent) is DecodingConfig and sent == DecodingConfig(**dataclasses.asdict(decoding))
    assert reads == {f"decoding.{field.name}" for field in dataclasses.fields(DecodingConfig)}  # asdict read all


def test_outside_recording_configs_are_plain() -> None:
    assert type(load_params(FIXTURE_PARAMS).decoding) is DecodingConfig


@pytest.mark.parametrize(("outer", "key", "expected"), [
    ("debate", "debate.agents", True), ("debate.agents", "debate.agents", True), ("eva", "eval", False),
    ("debate.agents", "debate", False),
])
def test_covers(outer: str, key: str, expected: bool) -> None:
    assert covers(outer, key) is expected


LEAVES = ["debate.agents", "debate.rounds", "debate.concurrency", "debate.max_cost_usd", "pool.n_pool",
          "pool.keep_raw", "pool.concurrency", "datasets.a.kind", "datasets.a.source.path", "eval.k",
          "endpoints.e.name", "endpoints.e.base_url", "endpoints.e.pricing.output"]


@pytest.mark.parametrize(("stage", "reads", "declared", "problems"), [
    # as main declared build_pool and score_debate before: a read undeclared, a declared section holding an
    # operational key (so debate.concurrency re-ran score_debate)
    ("build_pool@a", ["pool.n_pool", "pool.keep_raw", "pool.concurrency"], ["pool.n_pool"],
     ["build_pool@a reads pool.keep_raw, which it does not declare in dvc.yaml's params"]),
    ("score_debate", ["debate.agents", "debate.rounds"], ["debate"],
     ["score_debate declares debate, which holds debate.concurrency (requests in flight): a change to it would "
      "re-run the stage for nothing; declare the keys it reads",
      "score_debate declares debate, which holds debate.max_cost_usd (a spending cap: the stage refuses before "
      "paying, or stops): a change to it would re-run the stage for nothing; declare the keys it reads"]),
    ("report@a", ["pool.n_pool"], ["pool.n_pool", "eval"], ["report@a declares eval, which it never read"]),
    # exact; a stage's own exemption (fetch's checks before writing); a declared entry read in part
    ("score_debate", ["debate.agents", "debate.rounds", "debate.concurrency"], ["debate.agents", "debate.rounds"], []),
    ("fetch@a", ["datasets.a.source.path", "datasets.a.kind"], ["datasets.a.source"], []),
    ("normalize@a", ["datasets.a.kind"], ["datasets.a"], []),
    # the study prices its dollars at every model's pricing, which DVC cannot name one by one: it declares all of
    # endpoints, servers included; no other stage may
    ("study@a", ["endpoints.e.pricing.output"], ["endpoints"], []),
    ("report@a", ["endpoints.e.name"], ["endpoints"],
     ["report@a declares endpoints, which holds endpoints.e.base_url (which servers answer (replicas of one model)): "
      "a change to it would re-run the stage for nothing; declare the keys it reads",
      "report@a declares endpoints, which holds endpoints.e.pricing.output (list prices: the estimate and the "
      "spending cap): a change to it would re-run the stage for nothing; declare the keys it reads"]),
])
def test_declaration_problems(stage: str, reads: list[str], declared: list[str], problems: list[str]) -> None:
    assert declaration_problems(stage, reads, declared, LEAVES) == problems
