"""A small project whose debates, critiques, grading run, study and comparison were built on the simulated model
by the stages themselves (no DVC: each stage's script with its command line, run in the test's own process since
the project is a setup step, not a claim about a stage's process), for the explorer's method pages.

The toy dataset's 12 problems: a pool of 8 traces each (and the cheaper model's), scored and aggregated; DyLAN
debates with importance ratings; the hand-written step-labelled file critiqued 3 times each; the hand-written GSM8K
predictions and the pool graded with the critic on; the study of the toy dataset with the debate joined; the
comparison of voting and debate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURE_PARAMS
from tests.dvcproject import built_once
from tests.stage_here import run_stage_here
from tests.test_pipeline import small_sim_params
from tracevote.cli.demo import (
    BUILTIN_GSM8K,
    BUILTIN_PREDICTIONS,
    BUILTIN_PROBLEMS,
    BUILTIN_STEPS,
    deep_merge,
    local_dataset,
    write_params,
)
from tracevote.core.config import load_params
from tracevote.core.study_paths import model_paths
from tracevote.datasets.problems import load_problems
from tracevote.debate import build
from tracevote.debate.protocol import advance
from tracevote.store.calls import Call, CallRecord, encode
from tracevote.store.frame_writer import FrameWriter

RUN = "handwritten"
POOL_RUN = "pool_toy"  # tests.dvcproject.one_dataset's: the toy pool's traces graded
CHEAP = {"profile": "deepseek", "base_url": "http://127.0.0.1:9", "name": "cheap-model", "extra_body": {},
         "reasoning_effort": None, "api_key_env": "DEEPSEEK_API_KEY", "needs_key": False, "sim": {"accuracy": 0.2},
         "pricing": {"checked": "2026-07", "input_cache_miss": 0.05, "input_cache_hit": 0.01, "output": 0.1}}
DEBATE = {"max_tokens": 400, "concurrency": 4, "importance": True}


def methods_params() -> dict:
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), small_sim_params())
    params["datasets"]["demo_gsm8k"] = local_dataset(BUILTIN_GSM8K, problem_key="question", answer_format="integer")
    return deep_merge(params, {
        "pool": {"n_pool": 8}, "eval": {"k": [1, 4, 8], "repeat": 4, "bootstrap": 100}, "report": {"k": 8},
        "endpoints": {"cheap": CHEAP}, "deepconf": {"endpoints": ["cheap"]},
        "model": {"sim": {"accuracy": 0.3}},  # agents that often disagree, so some debates reach round 2
        "debate": DEBATE, "critique": {"n_votes": 3, "max_tokens": 2000},
        "grading": {"runs": {RUN: {"dataset": "demo_gsm8k", "predictions": "predictions.jsonl", "id_key": None}},
                    "critic": {"enabled": True}},
        "study": {"datasets": ["toy"], "debate": True, "debate_watch": "metrics/debate_results.json"}})


def build_methods(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    write_params(root / "params.yaml", methods_params())
    (root / "predictions.jsonl").write_bytes(BUILTIN_PREDICTIONS.read_bytes())
    for dataset, raw in (("toy", BUILTIN_PROBLEMS), ("toy_steps", BUILTIN_STEPS), ("demo_gsm8k", BUILTIN_GSM8K)):
        run_stage_here(root, "normalize.py", "--dataset", dataset, "--raw", str(raw), "--out", f"data/{dataset}.jsonl")
    for endpoint in ("deepseek", "cheap"):
        paths = model_paths(endpoint, "toy", "deepseek")
        chosen = [] if endpoint == "deepseek" else ["--endpoint", endpoint]  # deepconf.endpoint's: none
        run_stage_here(root, "build_pool.py", "--dataset", "toy", *chosen, "--problems", "data/toy.jsonl",
                       "--pools", str(paths.pools), "--manifest", str(paths.manifest))
        run_stage_here(root, "score.py", "--problems", "data/toy.jsonl", "--manifest", str(paths.manifest),
                       "--out", str(paths.scores), "--stops", str(paths.stops))
        run_stage_here(root, "aggregate.py", "--scores", str(paths.scores), "--stops", str(paths.stops),
                       "--out", str(paths.aggregate))
    run_stage_here(root, "build_debate.py", "--dataset", "toy", "--problems", "data/toy.jsonl", "--debates",
                   "debates/toy", "--manifest", "debates/toy.json")
    run_stage_here(root, "score_debate.py", "--debates", "debates", "--metrics", "metrics/debate.json",
                   "--headline", "metrics/headline/debate.json", "--details", "metrics/debate_results.json",
                   "--table", "metrics/debate.md")
    run_stage_here(root, "compare.py", "--debate-results", "metrics/debate_results.json", "--aggregate",
                   "data/aggregate", "--scores", "data/scores", "--out", "metrics/compare", "--plots", "plots")
    run_stage_here(root, "study.py", "--dataset", "toy", "--metrics", "metrics/study/toy", "--headline",
                   "metrics/headline/study/toy", "--plots", "plots/study/toy", "--debate-results",
                   "metrics/debate_results.json")
    run_stage_here(root, "build_critiques.py", "--dataset", "toy_steps", "--steps", "data/toy_steps.jsonl",
                   "--critiques", "critiques/toy_steps", "--manifest", "critiques/toy_steps.json")
    run_stage_here(root, "score_critiques.py", "--critiques", "critiques", "--metrics", "metrics/critique.json",
                   "--headline", "metrics/headline/critique", "--details", "metrics/critique_results.jsonl",
                   "--by-task", "metrics/critique_by_task.csv")
    for run, dataset in ((RUN, "demo_gsm8k"), (POOL_RUN, "toy")):
        run_stage_here(root, "build_grading_critic.py", "--run", run, "--gold", f"data/{dataset}.jsonl",
                       "--critic", f"grading/critic/{run}")
        run_stage_here(root, "grade.py", "--run", run, "--gold", f"data/{dataset}.jsonl", "--critic",
                       f"grading/critic/{run}", "--out", f"grading/runs/{run}.json",
                       "--details", f"grading/runs/{run}.jsonl")


def methods_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project, built once per test run (tests.dvcproject.built_once): read it, never change it."""
    return built_once(tmp_path_factory, "explorer_methods", build_methods)


HOSTILE = "</script><img src=x onerror=alert(1)>"


def hostile_debate(root: Path) -> Path:
    """A project of the toy dataset's first two problems whose debates were stored through the library with every
    agent's reply (and the judge's) carrying HOSTILE, as a model could write it."""
    root.mkdir(parents=True)
    write_params(root / "params.yaml", methods_params())
    run_stage_here(root, "normalize.py", "--dataset", "toy", "--raw", str(BUILTIN_PROBLEMS), "--out", "data/toy.jsonl")
    params = load_params(root / "params.yaml")
    problems = load_problems(root / "data" / "toy.jsonl")[:2]
    selection = build.Selection(None, (0, 1), 2)
    ledger = build.open_ledger(root / "debates" / "toy", params, problems)
    debates = build.debates_for(problems, params)
    for debate in debates:
        with ledger.writer(debate.problem.id) as writer:
            advance(debate, lambda call, writer=writer: stored(writer, call))
    build.write_manifest(root / "debates" / "toy.json", ledger, "toy", debates, selection)
    return root


def stored(writer: FrameWriter, call: Call) -> CallRecord:
    """A reply with HOSTILE in it; every agent answers its own number plus 6, so no round agrees and the debate runs
    through the judge (who picks agents 1 and 2) to round 2."""
    last = str(call.key)[-1]
    answer = 6 + (int(last) if last.isdigit() else 0)
    record = CallRecord(key=str(call.key), kind=call.kind, request_sha256=call.request_sha256,
                        text=f"{HOSTILE} so [1, 2] and [[5, 1, 2, 3]] \\boxed{{{answer}}}", finish_reason="stop",
                        prompt_tokens=10, cached_prompt_tokens=0, completion_tokens=5, usd=0.0001, latency_s=0.0)
    writer.append(call.key, encode(record))
    return record
