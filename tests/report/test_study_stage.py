"""stages/study.py on two simulated models with different accuracies and prices, from real files where the study
paths put them (pools with their manifests, score tables, aggregates, the debate's results): the frontier, the
dollars and the paired difference are the ones worked out here by hand, and every file says SIMULATED."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tests.deepconf.test_study import scores
from tests.dvcproject import run_stage
from tracevote.cli.demo import deep_merge
from tracevote.core.config import load_params
from tracevote.core.fileio import write_json
from tracevote.core.study_paths import model_paths
from tracevote.deepconf.evaluate import aggregate
from tracevote.store import codec
from tracevote.store.pool import Pool, Setting, write_manifest
from tracevote.store.records import Sample

PROMPT_TOKENS, TOKENS = 20, 100
CHEAP = {"profile": "deepseek", "base_url": "http://127.0.0.1:8000", "name": "cheap-model", "extra_body": {},
         "reasoning_effort": None, "api_key_env": "DEEPSEEK_API_KEY", "needs_key": False, "sim": {"accuracy": 0.3},
         "pricing": {"checked": "2026-07", "input_cache_miss": 0.05, "input_cache_hit": 0.01, "output": 0.1}}
# deepseek's fixture prices are 0.14 in and 0.28 out per 1M tokens: one trace costs 20 x 0.14 + 100 x 0.28
DEEPSEEK_TRACE, CHEAP_TRACE = (20 * 0.14 + 100 * 0.28) / 1e6, (20 * 0.05 + 100 * 0.1) / 1e6
# traces (of 4) answering right: deepseek Pass@1 (4 + 4 + 4 + 3) / 16, Cons@4 every problem; cheap p0 only
RIGHT = {"deepseek": {"p0": 4, "p1": 4, "p2": 4, "p3": 3}, "cheap": {"p0": 4, "p1": 0, "p2": 0, "p3": 0}}
DEBATE = [{"dataset": "toy", "problem_id": "p0", "correct": True, "completion_tokens": 900, "usd": 0.002},
          {"dataset": "toy", "problem_id": "p1", "correct": False, "completion_tokens": 1100, "usd": 0.004},
          {"dataset": "other", "problem_id": "q0", "correct": True, "completion_tokens": 5, "usd": 9.0}]


def write_params(root: Path) -> None:
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), {
        "datasets": {"toy": {**yaml.safe_load(FIXTURE_PARAMS.read_text())["datasets"]["tinymath"]}},
        "endpoints": {"cheap": CHEAP}, "deepconf": {"datasets": ["toy"], "endpoints": ["cheap"]},
        "model": {"backend": "sim"}, "pool": {"n_pool": 4}, "debate": {"datasets": ["toy"], "contest_halves": []},
        "eval": {"k": [1, 4], "repeat": 4, "bootstrap": 200}, "report": {"k": 4},
        "study": {"datasets": ["toy"], "k": [4], "debate": True, "debate_watch": "metrics/debate_results.json"}})
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def write_model(root: Path, endpoint: str) -> None:
    """The model's pool (a trace per problem, billed PROMPT_TOKENS), score table and aggregate, as its stages would."""
    paths = model_paths(endpoint, "toy", "deepseek")
    params = load_params(root / "params.yaml")
    pool = Pool.open_or_create(root / paths.pools, Setting.from_params(params), simulated=True)
    pool.register({problem: [{"role": "user", "content": problem}] for problem in RIGHT[endpoint]})
    for problem in RIGHT[endpoint]:
        with pool.writer(problem) as writer:
            writer.append(0, codec.encode(trace(problem), simulated=True))
    write_manifest(root / paths.manifest, pool, "toy", 4, list(RIGHT[endpoint]))
    table = scores(RIGHT[endpoint])
    (root / paths.scores).parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(root / paths.scores)
    write_json(root / paths.aggregate, {"simulated": True, "result": aggregate(table, params.eval).to_json()})


def trace(problem: str) -> Sample:
    return Sample(problem_id=problem, sample_id=0, text="\\boxed{1}", tokens=["x"] * TOKENS,
                  token_logprobs=np.zeros(TOKENS, np.float32), top_logprobs=None, top_tokens=None,
                  token_confidence=None, answer=1, finish_reason="stop", prompt_tokens=PROMPT_TOKENS,
                  completion_tokens=TOKENS, latency_s=0.1)


@pytest.fixture(scope="module")
def studied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("study")
    write_params(root)
    for endpoint in RIGHT:
        write_model(root, endpoint)
    write_json(root / "metrics" / "debate_results.json", {"simulated": True, "problems": DEBATE})
    run_stage(root, "study.py", "--dataset", "toy", "--metrics", "metrics/study/toy", "--headline",
              "metrics/headline/study/toy", "--plots", "plots/study/toy", "--debate-results",
              "metrics/debate_results.json")
    return root


def test_the_frontier_and_the_dollars_are_the_ones_worked_out_by_hand(studied: Path) -> None:
    table = pd.read_csv(studied / "metrics" / "study" / "toy" / "study.csv")
    on = table[table["on_frontier"]]
    # cheapest first: cheap's one trace (25%), deepseek's one trace (93.75%), deepseek's Cons@4 (100%); the other
    # votes at 4 cost Cons@4's dollars for no more accuracy, and cheap's for less; the debate is dearer and worse
    assert list(zip(on["model"], on["method"], on["accuracy_pct"], strict=True)) == [
        ("deepseek", "pass1", 93.75), ("deepseek", "cons", 100.0), ("cheap", "pass1", 25.0)]
    cost = dict(zip(zip(table["model"], table["method"], table["k"], strict=True), table["usd_per_problem"],
                    strict=True))
    assert cost["cheap", "pass1", 1] == pytest.approx(CHEAP_TRACE, abs=1e-6)
    assert cost["deepseek", "cons", 4] == pytest.approx(4 * DEEPSEEK_TRACE, abs=1e-6)
    debate = table[table["method"] == "debate"].iloc[0]
    assert (debate["model"], debate["accuracy_pct"], debate["usd_per_problem"]) == ("deepseek", 50.0, 0.003)
    assert table["simulated"].all()


def test_the_paired_difference_and_the_headlines(studied: Path) -> None:
    folder = studied / "metrics" / "headline" / "study" / "toy"
    cheap = orjson.loads((folder / "cheap" / "cons.json").read_bytes())
    # Cons@4: cheap is right on p0 only, deepseek on all four: -75 points
    assert (cheap["k"], cheap["accuracy_pct"], cheap["vs_reference_pts"], cheap["simulated"]) == (4, 25.0, -75.0, True)
    assert cheap["vs_reference_ci_low_pts"] <= -75.0 <= cheap["vs_reference_ci_high_pts"]
    reference = orjson.loads((folder / "deepseek" / "cons.json").read_bytes())
    assert reference["on_frontier"] and "vs_reference_pts" not in reference
    assert (folder / "deepseek" / "debate.json").is_file()


def test_every_output_says_simulated_and_why_the_critique_is_absent(studied: Path) -> None:
    page = (studied / "metrics" / "study" / "toy" / "study.md").read_text()
    assert page.startswith("**SIMULATED")
    assert "The critique does not join" in page
    assert "The debate (DyLAN, 4 agents) joins as model deepseek: 2 problems of toy" in page
    assert orjson.loads((studied / "metrics" / "study" / "toy" / "study.json").read_bytes())["simulated"] is True
    assert (studied / "plots" / "study" / "toy" / "accuracy_vs_usd.png").stat().st_size > 10_000
