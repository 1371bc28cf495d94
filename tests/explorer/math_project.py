"""A DeepConf project on an `answer_format: math` dataset for the explorer's tests: a pool imported through the real
interchange path (as tests/deepconf/test_score_math.py makes one: each trace boxes a chosen LaTeX answer), scored
and aggregated by the stages' own scripts, SIMULATED; no DVC."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from tests.conftest import FIXTURE_PARAMS
from tests.dvcproject import run_stage
from tracevote.cli.demo_params import deep_merge
from tracevote.core.config import Params, load_params
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.problems import Problem
from tracevote.sampling.prompts import setting_messages
from tracevote.store.interchange import import_file, to_json_line
from tracevote.store.pool import Pool, Setting, write_manifest
from tracevote.store.records import Sample

DATASET = "math500"  # the fixture's dataset of answer_format math
HOSTILE_ANSWER = "x</script><!--<b>"
# problem id -> (gold, the boxed answer of each trace in sample order; None: a trace that boxes nothing)
TRACES = {
    "half": (r"\frac{1}{2}", [r"\frac{1}{2}", "0.5", "0.4", r"\dfrac12", "2/5", None, "0.4", "0.5"]),
    "seven": ("7", ["7", HOSTILE_ANSWER, HOSTILE_ANSWER, "8", "7.0", "9", "8", None]),
}
SPLIT = ("seven", 5)  # this trace came from a server with a reasoning parser: its box is in its reasoning alone
N_POOL = 8


@dataclass(frozen=True)
class MathProject:
    root: Path
    params: Params


def sample(problem_id: str, sample_id: int, boxed: str | None) -> Sample:
    text = ("I cannot finish." if boxed is None else f"so the answer is $\\boxed{{{boxed}}}$") + " Check: 3"
    reasoning = ""
    if (problem_id, sample_id) == SPLIT:
        reasoning, text = text.split(" Check")[0], " Check: 3"
    tokens = [reasoning + text[:4], text[4:10], text[10:]]
    return Sample(problem_id=problem_id, sample_id=sample_id, text=text, tokens=tokens,
                  token_logprobs=np.array([-0.1, -0.3, -0.2], dtype=np.float32), top_logprobs=None,
                  top_tokens=None, token_confidence=np.array([1.0 + sample_id, 2.0, 1.5], dtype=np.float32),
                  answer=None, finish_reason="stop", prompt_tokens=10, completion_tokens=3, latency_s=0.5,
                  reasoning=reasoning)


def overrides() -> dict:
    return {"deepconf": {"datasets": [DATASET]},
            "model": {"backend": "sim"},
            "pool": {"n_pool": N_POOL, "keep_top_logprobs": False},
            "confidence": {"group_size": 2, "tail_tokens": 2},
            "eval": {"k": [1, 4, N_POOL], "repeat": 8, "bootstrap": 100},
            "report": {"k": 4},
            "online": {"warmup": 2}}


def build_math_project(root: Path) -> MathProject:
    """params.yaml, the problems, the pool and its manifest, then score and aggregate as their stages run them."""
    params_file = root / "params.yaml"
    root.mkdir(parents=True, exist_ok=True)
    params_file.write_text(yaml.safe_dump(deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), overrides()),
                                          sort_keys=False))
    params = load_params(params_file)
    problems = [Problem(problem_id, f"Problem {problem_id}: give the answer in LaTeX.", gold)
                for problem_id, (gold, _) in TRACES.items()]
    write_jsonl(root / "data" / f"{DATASET}.jsonl", (problem.to_record() for problem in problems))
    samples = root / "samples.jsonl"
    samples.write_bytes(b"".join(to_json_line(sample(problem_id, i, boxed), simulated=True)
                                 for problem_id, (_, answers) in TRACES.items() for i, boxed in enumerate(answers)))
    pool = Pool.open_or_create(root / "pools" / DATASET, Setting.from_params(params), simulated=True)
    pool.register(setting_messages(problems, pool.setting))
    import_file(samples, pool, problems, keep_top_logprobs=False, n_pool=N_POOL)
    write_manifest(root / "pools" / f"{DATASET}.json", pool, DATASET, N_POOL, list(TRACES))
    scores, stops = f"data/scores/{DATASET}.parquet", f"data/scores/{DATASET}.stops.parquet"
    run_stage(root, "score.py", "--problems", f"data/{DATASET}.jsonl", "--manifest", f"pools/{DATASET}.json",
              "--out", scores, "--stops", stops)
    run_stage(root, "aggregate.py", "--scores", scores, "--stops", stops, "--out", f"data/aggregate/{DATASET}.json")
    return MathProject(root, params)
