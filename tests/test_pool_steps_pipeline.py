"""A steps dataset made of a pool's own tinymath traces, through `dvc repro` in a real DVC project: a loopback server
answers the pool as the shipped model would (tinymath solutions, right and wrong, with logprobs in llama.cpp's chat
layout) and the critiques; fetch@<name> labels each solution by the generator's step values, the critique branch
runs on it unchanged, a changed pool re-runs that fetch, and the stage reads only params it declares."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.dvcproject import dvc, make_project, project_env, run, update_params
from tests.rows_server import serving
from tests.test_pipeline import small_sim_params
from tracevote.core.names import inside
from tracevote.core.stage_params import declaration_problems, every_stage_params
from tracevote.datasets.tinymath import Problem, first_error, generate

sys.path.insert(0, str(REPO_ROOT / "train"))  # the training folder is scripts, not a package
from tinymath_heldout import HELDOUT_DIFFICULTY, heldout_row

pytestmark = pytest.mark.slow

PROBLEMS = generate(31, 8, HELDOUT_DIFFICULTY)  # the held-out set's first problems
OWN = "tinymath_own"
TOP_K = 5


def solution(problem: Problem, variant: int) -> str:
    """One of four solutions the model writes: right; wrong at its second line (the error carried on); right but
    boxing another number; stopping without a box."""
    lines = [step.text for step in problem.steps]
    if variant == 1:
        value = problem.steps[1].value + 3
        lines[1] = lines[1].rsplit("=", 1)[0] + f"= {value}."
        for index in range(2, len(lines)):
            step = problem.steps[index]
            value = {"add": value + step.operand, "subtract": value - step.operand, "double": 2 * value}[step.operation]
            lines[index] = f"{lines[index].split(' ')[0]} ... = {value}."
        lines.append(f"\\boxed{{{value}}}")
    elif variant == 2:
        lines.append(f"\\boxed{{{problem.answer + 1}}}")
    elif variant == 0:
        lines.append(f"\\boxed{{{problem.answer}}}")
    return "\n".join(lines)


def completion(text: str) -> dict[str, Any]:
    """A chat completion of `text`, one character a token, logprobs as llama.cpp's server lays them out."""
    content = []
    for index, char in enumerate(text):
        chosen = -0.02 * (index % 7)
        top = [{"token": char, "logprob": chosen, "bytes": None}]
        top += [{"token": f"<{k}>", "logprob": chosen - 2.0 - k, "bytes": None} for k in range(TOP_K - 1)]
        content.append({"token": char, "logprob": chosen, "bytes": None, "top_logprobs": top})
    return {"id": "chatcmpl-loop", "object": "chat.completion", "created": 0, "model": "tinymath",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                         "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": len(text), "total_tokens": 40 + len(text)}}


class TinymathModel(BaseHTTPRequestHandler):
    """Answers a pool request for a known problem with one of its solutions (chosen by the request's seed), a
    critique with a vote for the first step ("\\boxed{0}" or -1 by the seed), and anything else with "42"."""

    protocol_version = "HTTP/1.1"
    problems: ClassVar[dict[str, Problem]] = {problem.problem: problem for problem in PROBLEMS}

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_error(404)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        prompt = request["messages"][-1]["content"]
        seed = int(request.get("seed") or 0)
        problem = self.problems.get(prompt.split("\n\n")[0])
        if "<paragraph_0>" in prompt:
            text = f"The first error.\n\\boxed{{{seed % 2 - 1}}}"
        else:
            text = solution(problem, seed % 4) if problem is not None else "42"
        body = json.dumps(completion(text)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextlib.contextmanager
def tinymath_server() -> Iterator[str]:
    with serving(TinymathModel) as url:
        yield f"{url}/v1"


def write_problems(path: Path, problems: list[Problem]) -> Path:
    path.write_text("".join(json.dumps(heldout_row(problem, 31)) + "\n" for problem in problems))
    return path


def params(base_url: str, problems: Path) -> dict[str, Any]:
    overrides = small_sim_params(backend="openai", base_url=base_url, name="tinymath", profile="local")
    source = {"hf_dataset": None, "hf_config": "default", "hf_split": "test",
              "api_url": "https://datasets-server.huggingface.co"}
    overrides["datasets"] |= {  # beside the toy datasets the other methods name
        "tinymath": {"source": {**source, "path": str(problems), "watch": str(problems)}, "kind": "problems",
                     "problem_key": "problem", "answer_key": "answer", "id_key": "id", "answer_format": "integer"},
        OWN: {"source": {**source, "path": None, "pool": "tinymath", "watch": "pools/tinymath.json",
                         "per_problem": 3},
              "kind": "steps", "problem_key": "problem", "answer_key": "label", "id_key": "id",
              "answer_format": "integer"}}
    return {**overrides, "deepconf": {"datasets": ["tinymath"]}, "critique": {"datasets": [OWN], "n_votes": 2},
            "decoding": {**overrides["decoding"], "seed": 0}, "pool": {**overrides["pool"], "n_pool": 8},
            "eval": {"k": [1, 2, 4, 8], "repeat": 4}, "report": {"k": 8}}


def expected_label(problem: Problem, steps: list[str]) -> int:
    """first_error on the solution's lines; a right solution boxing another number is wrong at its box."""
    text = "\n".join(steps)
    boxed = int(steps[-1].removeprefix("\\boxed{").removesuffix("}"))
    label = first_error(problem, text)
    return len(steps) - 1 if label == -1 and boxed != problem.answer else label


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    root = tmp_path_factory.mktemp("pool_steps")
    with tinymath_server() as base_url:
        problems = write_problems(root / "tinymath.jsonl", PROBLEMS[:6])
        project = make_project(root / "project", params(base_url, problems))
        reads = root / "reads"
        result = dvc(project, "repro", "report_critiques", env=project_env({"TRACEVOTE_PARAMS_READS": str(reads)}))
        run(project, "git", "add", "-A")
        run(project, "git", "commit", "-qm", "first run")
        yield project, result.stdout, str(reads)


def test_the_critique_branch_runs_on_the_pools_own_solutions(built: tuple[Path, str, str]) -> None:
    project, output, _ = built
    for stage in ("build_pool@tinymath", f"fetch@{OWN}", f"normalize@{OWN}", f"build_critiques@{OWN}",
                  "score_critiques", "report_critiques"):
        assert f"Running stage '{stage}'" in output, stage
    # 6 problems x 8 traces, each one of 4 texts (the request's seed picks it), at most 3 solutions a problem
    summary = re.search(rf"fetch: {OWN} from the pool of tinymath \(tinymath/tinymath-\w+, 8 per problem\): 48 traces: "
                        r"(\d+) duplicate, (\d+) no box; (\d+) solutions \((\d+) without an error, (\d+) with one\)",
                        output)
    assert summary is not None, output
    duplicate, no_box, solutions, right, wrong = map(int, summary.groups())
    rows = [json.loads(line) for line in (project / "data" / f"{OWN}.jsonl").read_text().splitlines()]
    assert len(rows) == solutions <= 48 - duplicate - no_box and solutions <= 6 * 3
    assert right == sum(row["label"] == -1 for row in rows) > 0 and wrong == solutions - right > 0
    by_id = {problem.id: problem for problem in PROBLEMS}
    assert all(row["task"] == "tinymath" and row["meta"]["simulated"] is False for row in rows)
    for row in rows:
        assert row["label"] == expected_label(by_id[row["meta"]["problem_id"]], row["steps"]), row
    assert sorted({row["label"] for row in rows}) == [-1, 1, 4]  # right; the second line; the box
    metrics = json.loads((project / "metrics" / "critique.json").read_text())
    assert (metrics["solutions"], metrics["n_error"], metrics["simulated"]) == (solutions, wrong, False)


def test_fetch_reads_only_the_params_it_declares(built: tuple[Path, str, str]) -> None:
    project, _, reads = built
    recorded = json.loads(inside(Path(reads), f"fetch@{OWN}", ".json").read_text())["reads"]
    assert f"datasets.{OWN}.source.pool" in recorded and f"datasets.{OWN}.source.per_problem" in recorded
    declared = every_stage_params(project)[f"fetch@{OWN}"]
    leaves = [key for key in recorded]
    assert declaration_problems(f"fetch@{OWN}", recorded, declared, leaves) == []


def test_a_changed_pool_re_runs_the_fetch_that_reads_it(built: tuple[Path, str, str]) -> None:
    """Other problems, as many: the manifest's count and samples stay, its problems digest changes."""
    project, _, _ = built
    assert f"fetch@{OWN}" not in json.loads(dvc(project, "status", "--json").stdout or "{}")
    manifest = json.loads((project / "pools" / "tinymath.json").read_text())
    path = Path(yaml.safe_load((project / "params.yaml").read_text())["datasets"]["tinymath"]["source"]["path"])
    with tinymath_server() as base_url:
        write_problems(path, PROBLEMS[2:8])
        update_params(project, {"endpoints": {"deepseek": {"base_url": base_url}}})
        result = dvc(project, "repro", f"normalize@{OWN}", env=project_env({"TRACEVOTE_REBUILD": "1"}))
    changed = json.loads((project / "pools" / "tinymath.json").read_text())
    assert (changed["problems"], changed["samples"]) == (manifest["problems"], manifest["samples"])
    assert changed["problems_digest"] != manifest["problems_digest"]
    assert "Running stage 'build_pool@tinymath'" in result.stdout and f"Running stage 'fetch@{OWN}'" in result.stdout
    ids = {json.loads(line)["meta"]["problem_id"] for line in (project / "data" / f"{OWN}.jsonl").read_text()
           .splitlines()}
    assert ids == {problem.id for problem in PROBLEMS[2:8]}
