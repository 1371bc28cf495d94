"""`python -m tracevote sim-server` as a user starts it: it says which gold answers it knows (from --problems, else
the project's normalized problems, of every answer format), warns when it knows none or cannot use a file or a
gold, answers a MATH-500 problem with its LaTeX gold, and a taken port or a bad fault spec is one line."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import requests
import yaml

from tests.conftest import FIXTURE_PARAMS, hang_guard_s
from tests.dvcproject import project_env
from tracevote.cli.demo import BUILTIN_PROBLEMS, find_local_file, local_recipe, write_params
from tracevote.core.config import load_params
from tracevote.core.fileio import write_jsonl
from tracevote.core.simulated import SAMPLE_HEADER
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.normalize import normalize_dataset, normalize_rows


def sim_server(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tracevote", "sim-server", *args], cwd=cwd, env=project_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def lines_until_listening(server: subprocess.Popen[str]) -> Iterator[str]:
    """Its output lines up to and including "listening on ...", then it is stopped."""
    assert server.stdout is not None
    try:
        for line in server.stdout:
            yield line.rstrip("\n")
            if "listening on" in line:
                return
        pytest.fail(f"sim-server exited ({server.wait(hang_guard_s())}) before listening")
    finally:
        server.terminate()
        server.wait(hang_guard_s())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    return tmp_path


def test_without_known_answers_it_warns_that_accuracy_means_nothing(project: Path) -> None:
    said = list(lines_until_listening(sim_server(project, "--port", str(free_port()), "--tokens-per-second", "40",
                                                 "--send-buffer", "8192")))
    assert any("WARNING: it knows no gold answers" in line and "means nothing" in line for line in said), said
    assert any("40 tokens/s per stream, send buffer 8192 bytes" in line for line in said), said  # the pace it keeps


def test_it_learns_the_gold_answers_of_the_projects_normalized_problems(project: Path) -> None:
    config = load_params(FIXTURE_PARAMS).dataset("aime_2025")
    problems = normalize_rows(read_local_rows(BUILTIN_PROBLEMS), config, "demo")
    write_jsonl(project / "data" / "aime_2025.jsonl", (p.to_record() for p in problems))
    said = list(lines_until_listening(sim_server(project, "--port", str(free_port()))))
    assert f"sim-server: knows the gold answers of {len(problems)} problems (data/aime_2025.jsonl)" in said
    assert not any("WARNING" in line for line in said)


def test_a_taken_port_is_one_line_naming_it(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "tracevote", "sim-server", "--port", str(port)], cwd=project,
                                env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use); is another server "
        f"(an earlier sim-server?) on that port? Choose another with --port")
    assert "Traceback" not in result.stderr


def test_a_bad_fault_spec_is_refused_before_the_banner(project: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tracevote", "sim-server", "--faults", "bogus=0.5"], cwd=project,
                            env=project_env(), capture_output=True, text=True, timeout=hang_guard_s())
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: --faults 'bogus=0.5': unknown fault 'bogus'")


# ---- every answer format: the simulator answers a MATH-500 problem, and skips what it cannot use with a warning ----

MATH_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "math_problems.jsonl"
_BOXED_AT_END = re.compile(r"\\boxed\{(.*)\}\Z", re.DOTALL)


def sure_project(project: Path, datasets: dict[str, Path] | None = None) -> Path:
    """`project` with a simulator whose every trace is right (model.sim.accuracy 1), reading `datasets` from the
    files named (the entries of the tests' params), each normalized into data/ as `dvc repro normalize` does."""
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["model"]["sim"]["accuracy"] = 1.0
    for name, path in (datasets or {}).items():
        params["datasets"][name] = local_recipe(params["datasets"][name], path)
    write_params(project / "params.yaml", params)
    loaded = load_params(project / "params.yaml")
    for name in datasets or {}:
        records = normalize_dataset(read_local_rows(loaded.dataset(name).source.path), loaded.dataset(name), name)
        write_jsonl(project / "data" / f"{name}.jsonl", (record.to_record() for record in records))
    return project


def boxed_reply(base_url: str, problem: str) -> str | None:
    """What the server boxes for one solve call on `problem`, asked as the pool's prompts ask."""
    body = {"model": "deepseek-v4-flash", "temperature": 0.6, "max_tokens": 32768,
            "messages": [{"role": "user", "content": f"{problem}\n\nPlease reason step by step, and put your final "
                                                     f"answer within \\boxed{{}}."}]}
    reply = requests.post(f"{base_url}/chat/completions", json=body, headers={SAMPLE_HEADER: "math/0"},
                          timeout=hang_guard_s())
    reply.raise_for_status()
    found = _BOXED_AT_END.search(reply.json()["choices"][0]["message"]["content"])
    return found.group(1) if found else None


def serve_and_ask(project: Path, problem: str) -> tuple[list[str], str | None]:
    """sim-server's lines up to "listening on URL", and its boxed answer to `problem` asked at that URL."""
    said: list[str] = []
    for line in lines_until_listening(sim_server(project, "--port", str(free_port()))):
        said.append(line)
        if "listening on" in line:  # the server runs until this loop ends
            return said, boxed_reply(line.rsplit(" ", 1)[-1], problem)
    return said, None


def test_it_answers_a_math_problem_with_its_latex_gold_and_warns_of_what_it_cannot_use(project: Path) -> None:
    sure_project(project, {"math500": MATH_FIXTURE})
    (project / "data" / "gsm8k.jsonl").write_text("not a problems file\n", encoding="utf-8")
    said, answer = serve_and_ask(project, "Convert the point $(0,3)$ in rectangular coordinates to polar coordinates.")
    assert answer == "\\left( 3, \\frac{\\pi}{2} \\right)", said
    assert "sim-server: knows the gold answers of 5 problems (data/math500.jsonl)" in said
    assert any(line.startswith("sim-server: WARNING: data/gsm8k.jsonl skipped, it cannot be read: ") for line in said)
    assert ("sim-server: WARNING: data/math500.jsonl: 1 of 6 problems skipped, their gold cannot be simulated "
            "(first: math500-06, '2π': characters other than printable ASCII); it answers them at random") in said
    assert not any("Traceback" in line for line in said)


def test_with_every_shared_dataset_normalized_it_starts_and_answers_math_500(project: Path, shared_data: Path) -> None:
    names = ("aime_2025", "aime_2024", "gsm8k", "math500", "amc23", "processbench_gsm8k")
    sure_project(project, {name: find_local_file(shared_data, name) for name in names})
    first = orjson.loads((project / "data" / "math500.jsonl").read_bytes().splitlines()[0])
    said, answer = serve_and_ask(project, first["problem"])
    assert first["answer"] == "\\left( 3, \\frac{\\pi}{2} \\right)" and answer == first["answer"], said
    problems = sum(len((project / "data" / f"{name}.jsonl").read_bytes().splitlines()) for name in names[:-1])
    files = ", ".join(f"data/{name}.jsonl" for name in names[:-1])  # processbench holds steps, not problems
    assert f"sim-server: knows the gold answers of {problems} problems ({files})" in said
    assert not any("WARNING" in line or "Traceback" in line for line in said), said


def test_with_a_reasoning_parser_it_sends_the_thinking_apart_and_says_so(project: Path) -> None:
    said: list[str] = []
    body = {"model": "deepseek-v4-flash", "max_tokens": 4096, "logprobs": True, "top_logprobs": 1,
            "messages": [{"role": "user", "content": "Find x.\n\nPlease reason step by step."}]}
    for line in lines_until_listening(sim_server(project, "--port", str(free_port()), "--reasoning-parser",
                                                 "reasoning")):
        said.append(line)
        if "listening on" in line:  # the server runs until this loop ends
            reply = requests.post(f"{line.rsplit(' ', 1)[-1]}/chat/completions", json=body, timeout=hang_guard_s())
            choice = reply.json()["choices"][0]
    assert any("solve replies' thinking in message.reasoning" in line for line in said), said
    thinking, answer = choice["message"]["reasoning"], choice["message"]["content"]
    assert thinking and answer.startswith("\n\nTherefore, the answer is")
    assert "".join(item["token"] for item in choice["logprobs"]["content"]) == thinking + answer  # every token
