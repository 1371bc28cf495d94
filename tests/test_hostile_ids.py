"""Ids are data, never paths (issue 22 item 1): hostile ids fed through every entry point that writes.

Every case runs in a project folder nested inside a watched "outside" folder that holds sentinel files, among
them a file at each path the old code wrote to for `../../../../../escaped` (`<outside>/a/b/escaped.tvf`, ...)
and for an absolute id. Afterwards nothing outside the project is created, removed or changed (listing, bytes,
mtimes), and where the entry point succeeded every stored call reads back under its original id, each id in a
log of its own (also on a case-insensitive file system). Ids that normalize's rule refuses are refused by every
reader of a normalized file, with one line naming the file, line and field, before anything is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s
from tests.dvcproject import one_dataset, project_env
from tests.stage_here import TRACEVOTE_MAIN, run_script_here
from tracevote.cli.demo import deep_merge, write_params
from tracevote.cli.main import main
from tracevote.core.config import load_params
from tracevote.core.errors import DataError
from tracevote.datasets.problems import Problem, load_problems, normalize_rows
from tracevote.store.calls import CallLedger
from tracevote.store.interchange import to_json_line
from tracevote.store.ledger import Ledger
from tracevote.store.live import LiveLedger
from tracevote.store.pool import Pool
from tracevote.store.records import Sample

TOP = "\x01top"  # stands for the watched outside folder's absolute path in an id, filled in per case
LEGAL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # normalize's rule, restated: datasets.problems
# Ids normalize refuses: each names a file the old code would have written outside, or is no file name at all.
REFUSED = ["../../../../../escaped", "../../../../../../escaped", "../../../../../../../escaped",
           "../../../../../../../../escaped", f"{TOP}/abs-target", "..", ".", "", "a/b", "a\\b", "nul\x00byte",
           "x" * 10_240, "\uff50\uff11", "\u04401", "p1\n", "C:\\evil", "~", "-p"]
# Ids normalize admits that are still hard as file names: case-only twins, Windows reserved names, a trailing
# dot, the longest id.
ADMITTED = ["p1", "P1", "con", "CON", "aux.txt", "LPT1", "x.", "a..b", "a" * 128, "9-z_Q.r"]


# ---- the watched outside folder ----

@dataclass(frozen=True)
class Outside:
    top: Path
    project: Path

    def listing(self) -> dict[str, tuple[Any, ...]]:
        """Every entry outside the project: a folder's mtime, a file's bytes and mtime."""
        found: dict[str, tuple[Any, ...]] = {".": ("dir", self.top.stat().st_mtime_ns)}
        for folder, dirs, files in os.walk(self.top):
            here = Path(folder)
            dirs[:] = [name for name in dirs if here / name != self.project]
            for name in dirs:
                found[str((here / name).relative_to(self.top))] = ("dir", (here / name).lstat().st_mtime_ns)
            for name in files:
                path = here / name
                found[str(path.relative_to(self.top))] = ("file", path.read_bytes(), path.lstat().st_mtime_ns)
        return found

    def real(self, name: str) -> str:
        return name.replace(TOP, str(self.top))


@contextlib.contextmanager
def watched(base: Path | None = None) -> Iterator[Outside]:
    """`<outside>/a/b/project`, with sentinels where `../` x 5..8 and the absolute id would land; checks on exit
    that nothing outside the project changed (only when the block succeeds: a failure shows its own cause)."""
    with tempfile.TemporaryDirectory(dir=base) as scratch:
        top = Path(scratch).resolve() / "outside"
        project = top / "a" / "b" / "project"
        project.mkdir(parents=True)
        for folder in (top, top / "a", top / "a" / "b"):
            (folder / "escaped.tvf").write_bytes(b"a file that was here before\n")
        (top / "abs-target.tvf").write_bytes(b"another one\n")
        (top / "a" / "b" / "sentinel.txt").write_text("untouched\n")
        outside = Outside(top, project)
        before = outside.listing()
        yield outside
        assert outside.listing() == before, "something outside the project was created, removed or changed"


def project_files(project: Path) -> set[str]:
    return {str(path.relative_to(project)) for path in project.rglob("*")}


def one_log_per_id(ledger: Ledger, ids: list[str]) -> None:
    """Each id reads back from the ledger, in a log of its own: no two ids share a file, even case-folded."""
    assert ledger.item_ids() == sorted(ids)
    logs = sorted(path.name for path in (ledger.root / ledger.LOGS).iterdir())
    assert len(logs) == len({name.lower() for name in logs}) == len(ids)
    assert sorted(ledger.log_path(item_id).name for item_id in ids) == logs


# ---- ids made by hypothesis ----

hostile_ids = st.one_of(
    st.sampled_from(REFUSED + ADMITTED),
    st.text(max_size=30),
    st.lists(st.sampled_from(["..", "/", "\\", "\x00", ".", "a", "A", "\u0430", TOP, "con", "~"]), min_size=1,
             max_size=8).map("".join),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,12}", fullmatch=True),
)
FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(ids=st.lists(hostile_ids, min_size=1, max_size=6, unique=True), pool=st.booleans())
def test_the_ledger_stores_any_id_inside_its_folder_and_reads_it_back(ids: list[str], pool: bool) -> None:
    with watched() as outside:
        ids = list(dict.fromkeys(outside.real(item_id) for item_id in ids))
        kind: type[Ledger] = Pool if pool else CallLedger
        root = outside.project / "debates" / "toy" / "simulated-0123456789ab"
        ledger = kind.open_at(root, {"method": "hostile ids"}, simulated=True)
        ledger.register_digests({item_id: hashlib.sha256(item_id.encode()).hexdigest() for item_id in ids})
        for item_id in ids:
            with ledger.writer(item_id) as writer:
                writer.append(0 if pool else "r0/a1", item_id.encode())
        again = kind(root)
        one_log_per_id(again, ids)
        for item_id in ids:
            assert [(key, bytes(payload)) for key, payload in again.iter_payloads(item_id)] == [
                (0 if pool else "r0/a1", item_id.encode())]


def problem_rows(ids: list[str]) -> list[dict[str, Any]]:
    return [{"id": item_id, "problem": f"What is {n} + 7?", "answer": str(n + 7)} for n, item_id in enumerate(ids)]


@FAST
@given(st.lists(hostile_ids, min_size=1, max_size=5, unique=True))
def test_normalize_admits_exactly_the_ids_of_its_rule(ids: list[str]) -> None:
    cfg = load_params(FIXTURE_PARAMS).dataset("aime_2025")
    refused = [n for n, item_id in enumerate(ids, start=1) if not LEGAL_ID.fullmatch(item_id)]
    if not refused:
        assert [p.id for p in normalize_rows(problem_rows(ids), dataclass_with_id(cfg), "raw.jsonl")] == ids
        return
    with pytest.raises(DataError) as caught:
        normalize_rows(problem_rows(ids), dataclass_with_id(cfg), "raw.jsonl")
    for number in refused:
        assert f"row {number}: field 'id': " in str(caught.value)


def dataclass_with_id(cfg: Any) -> Any:
    import dataclasses

    return dataclasses.replace(cfg, problem_key="problem", answer_key="answer", id_key="id")


@FAST
@given(st.lists(hostile_ids, min_size=1, max_size=5, unique=True))
def test_a_hand_edited_normalized_file_is_checked_again(ids: list[str]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "toy.jsonl"
        path.write_text("".join(json.dumps({**row, "answer": int(row["answer"]), "meta": {}}) + "\n"
                                for row in problem_rows(ids)))
        first_refused = next((n for n, item_id in enumerate(ids, start=1) if not LEGAL_ID.fullmatch(item_id)), None)
        if first_refused is None:
            assert [p.id for p in load_problems(path)] == ids
            return
        with pytest.raises(DataError) as caught:
            load_problems(path)
        message = str(caught.value)
        assert message.startswith(f"{path}: line {first_refused}: field 'id': ") and "\n" not in message


# ---- pool import, both formats, in-process (the CLI's own main) ----

def sample_line(problem_id: str, sample_id: int) -> bytes:
    tokens = ["The", " answer", " 7"]
    sample = Sample(problem_id=problem_id, sample_id=sample_id, text="".join(tokens), tokens=tokens,
                    token_logprobs=np.array([-0.1, -0.2, -0.3], dtype=np.float32),
                    top_logprobs=np.array([[-0.1, -2.0], [-0.2, -3.0], [-0.3, -4.0]], dtype=np.float32),
                    top_tokens=None, token_confidence=None, answer=7, finish_reason="stop", prompt_tokens=12,
                    completion_tokens=3, latency_s=0.5)
    return to_json_line(sample, simulated=False)


PICKLE_MODEL = "deepseek-ai/DeepSeek-R1-0528-Qwen3-8B"


def write_pickle(folder: Path, qid: int, answer: int) -> None:
    """One run of the official offline code on problem `qid` (see tests/store/test_deepconf_pickle.py)."""
    traces = [{"stop_reason": "stop", "text": f"so \\boxed{{{answer}}}", "token_ids": np.arange(2), "num_tokens": 2,
               "confs": [1.0, 2.0], "extracted_answer": str(answer), "is_correct": np.bool_(True)}]
    result = {"question_id": qid, "run_id": "1", "question": "q", "ground_truth": str(answer), "all_traces": traces,
              "voted_answer": str(answer), "is_voted_correct": True, "accuracy": 1.0,
              "token_stats": {"total_tokens": 2}, "config": {"model_path": PICKLE_MODEL, "window_size": 2048},
              "timestamp": "2025-08-20T10:00:00"}
    folder.mkdir(exist_ok=True)
    (folder / f"deepconf_simple_qid{qid}_rid1_20250820_100001.pkl").write_bytes(pickle.dumps(result))


def run_cli(project: Path, argv: list[str]) -> int:
    with contextlib.chdir(project), contextlib.redirect_stdout(None), contextlib.redirect_stderr(None):
        try:
            return main(argv)
        except SystemExit as exit_:
            return int(exit_.code or 0)


@FAST
@given(ids=st.lists(hostile_ids, min_size=1, max_size=4, unique=True), stray=st.none() | hostile_ids,
       fmt=st.sampled_from(["jsonl", "deepconf-pickle"]))
def test_pool_import_stores_legal_ids_inside_and_refuses_the_rest(ids: list[str], stray: str | None,
                                                                  fmt: str) -> None:
    with watched() as outside:
        project = outside.project
        ids = list(dict.fromkeys(outside.real(item_id) for item_id in ids))
        params = yaml.safe_load(FIXTURE_PARAMS.read_text())
        params["endpoints"]["deepseek"]["name"] = PICKLE_MODEL
        write_params(project / "params.yaml", params)
        (project / "problems.jsonl").write_text("".join(json.dumps({**row, "answer": int(row["answer"]), "meta": {}})
                                                        + "\n" for row in problem_rows(ids)))
        sampled = ids if stray is None or fmt != "jsonl" else [*ids, outside.real(stray)]
        if fmt == "jsonl":
            (project / "samples.jsonl").write_bytes(b"".join(sample_line(item_id, 0) for item_id in sampled))
            argv = ["pool", "import", "samples.jsonl", "--problems", "problems.jsonl", "--allow-any-sample-id"]
        else:
            for qid in range(len(ids)):
                write_pickle(project / "outputs", qid, qid + 7)
            argv = ["pool", "import", "--format", "deepconf-pickle", "outputs", "--problems", "problems.jsonl"]
        legal = all(LEGAL_ID.fullmatch(item_id) for item_id in ids) and set(sampled) <= set(ids)
        before = project_files(project)
        code = run_cli(project, argv)
        if not legal:
            assert code == 2 and project_files(project) == before, "a refused import wrote something"
            return
        assert code == 0
        [root] = [path.parent for path in (project / "pools").glob("*/*/pool.json")]
        pool = Pool(root)
        one_log_per_id(pool, ids)
        for item_id in ids:
            assert [sample.problem_id for sample in pool.iter_samples(item_id)] == [item_id]


# ---- the stages and the grade command, as processes, on a fixed set of ids ----

N_POOL = 2


def stage_params(project: Path) -> dict[str, Any]:
    """The tests' params: the built-in simulator answers, tiny builds (two traces, three agents for one round,
    one critique), a grading run of `predictions/toy.jsonl` with the critic on."""
    overrides = deep_merge(one_dataset("toy", project / "data" / "toy.jsonl", id_key="id"), {
        "model": {"backend": "sim", "sim": {"mean_tokens": 40}},
        "decoding": {"max_tokens": 200, "top_logprobs": 5},
        "pool": {"n_pool": N_POOL, "concurrency": 4},
        "eval": {"k": [1, N_POOL]}, "report": {"k": N_POOL},
        "online": {"warmup": 1, "live": {"datasets": ["toy"], "methods": ["low"], "budget": N_POOL, "concurrency": 4}},
        "debate": {"agents": 3, "rounds": 1, "max_tokens": 200, "concurrency": 4},
        "critique": {"n_votes": 1, "max_tokens": 200, "concurrency": 4},
        "grading": {"runs": {"toy_run": {"dataset": "toy", "predictions": "predictions/toy.jsonl",
                                         "id_key": "unique_id"}},
                    "critic": {"enabled": True, "max_samples": 50, "concurrency": 4}},
        "deepconf": {"endpoints": ["qwen"]},  # a second model of the study: build_pool_model
    })
    params = deep_merge(yaml.safe_load(FIXTURE_PARAMS.read_text()), overrides)
    params["endpoints"]["qwen"] = {**params["endpoints"]["deepseek"], "name": "qwen-sim", "sim": {"accuracy": 0.2}}
    return params


def write_stage_inputs(project: Path, ids: list[str]) -> None:
    """Hand-written normalized files carrying `ids` (as a committed data/<name>.jsonl would), and predictions."""
    problems = [{"id": item_id, "problem": f"What is {n} + 7?", "answer": n + 7,
                 "meta": {"solution": f"{n} + 7 = {n + 7}", "unique_id": item_id}} for n, item_id in enumerate(ids)]
    steps = [{"id": item_id, "problem": f"What is {n} + 7?", "steps": [f"{n} + 7 = {n + 8}.", f"So {n + 8}."],
              "label": 0, "task": "toy", "meta": {}} for n, item_id in enumerate(ids)]
    predictions = [{"id": item_id, "thinking": f"{n} and 7 make {n + 7}.", "content": f"#### {n + 7}"}
                   for n, item_id in enumerate(ids)]
    for name, records in (("data/toy.jsonl", problems), ("data/toy_steps.jsonl", steps),
                          ("predictions/toy.jsonl", predictions)):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("".join(json.dumps(record) + "\n" for record in records))
    write_params(project / "params.yaml", stage_params(project))


PAID_STAGES = {
    "build_pool": ["--dataset", "toy", "--problems", "data/toy.jsonl", "--pools", "pools/toy",
                   "--manifest", "pools/toy.json"],
    "build_pool_model": ["--dataset", "toy", "--endpoint", "qwen", "--problems", "data/toy.jsonl", "--pools",
                         "study/qwen/pools/toy", "--manifest", "study/qwen/pools/toy.json"],
    "build_online": ["--dataset", "toy", "--problems", "data/toy.jsonl", "--online", "online/toy",
                     "--manifest", "online/toy.json"],
    "build_debate": ["--dataset", "toy", "--problems", "data/toy.jsonl", "--debates", "debates/toy",
                     "--manifest", "debates/toy.json"],
    "build_critiques": ["--dataset", "toy_steps", "--steps", "data/toy_steps.jsonl", "--critiques",
                        "critiques/toy_steps", "--manifest", "critiques/toy_steps.json"],
    "build_grading_critic": ["--run", "toy_run", "--gold", "data/toy.jsonl", "--critic", "grading/critic/toy_run"],
}


SCRIPTS = {"build_pool_model": "build_pool"}  # a stage whose script is another's


def run_paid_stages(project: Path, stages: Iterable[str] = PAID_STAGES) -> dict[str, subprocess.CompletedProcess]:
    """The paid `stages` (all six by default) at once (each has its own folders and its own simulator), as DVC runs
    them."""
    running = {stage: subprocess.Popen([sys.executable, str(REPO_ROOT / "stages" / f"{SCRIPTS.get(stage, stage)}.py"),
                                        *PAID_STAGES[stage]],
                                       cwd=project, env=project_env(), text=True, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
               for stage in stages}
    done = {}
    for stage, process in running.items():
        stdout, stderr = process.communicate(timeout=hang_guard_s())
        done[stage] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return done


def run_paid_stages_here(project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                         stages: Iterable[str] = PAID_STAGES) -> dict[str, subprocess.CompletedProcess]:
    """run_paid_stages's `stages` one after another in this process, each script run as `python` runs it (its
    command line, the project as its folder, no API key): their exit codes and output, without an interpreter
    starting and importing for each."""
    done = {}
    for stage in stages:
        script = REPO_ROOT / "stages" / f"{SCRIPTS.get(stage, stage)}.py"
        done[stage] = run_script_here(project, script, PAID_STAGES[stage], monkeypatch, capsys,
                                      without_api_keys=True)
    return done


# (a refused id, how the six stages run): as processes, as DVC runs them, for one; in this process for the others,
# the same scripts with the same command lines (as tests/test_paid_stage_refusals.py runs its rows)
REFUSED_AT_STAGES = [(REFUSED[0], "processes"), (f"{TOP}/abs-target", "here"), ("nul\x00byte", "here"),
                     ("x" * 10_240, "here"), ("\u04401", "here")]


@pytest.mark.parametrize(("refused", "runs"), REFUSED_AT_STAGES)
def test_a_paid_stage_refuses_a_normalized_file_with_a_bad_id_and_writes_nothing(
        tmp_path: Path, refused: str, runs: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with watched(tmp_path) as outside:
        write_stage_inputs(outside.project, ["p1", outside.real(refused), "p3"])
        before = project_files(outside.project)
        results = (run_paid_stages(outside.project) if runs == "processes"
                   else run_paid_stages_here(outside.project, monkeypatch, capsys))
        assert set(results) == set(PAID_STAGES)
        for stage, result in results.items():
            assert result.returncode == 2, f"{stage}: {result.stdout}{result.stderr}"
            [line] = result.stderr.splitlines()
            assert re.match(r"error: data/toy(_steps)?\.jsonl: line 2: field 'id': ", line), f"{stage}: {line}"
        assert project_files(outside.project) == before


def test_every_paid_stage_stores_admitted_ids_inside_and_reads_them_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with watched(tmp_path) as outside:
        project = outside.project
        write_stage_inputs(project, ADMITTED)
        for stage, result in run_paid_stages_here(project, monkeypatch, capsys).items():
            assert result.returncode == 0, f"{stage}: {result.stdout}{result.stderr}"
        for folder in ("pools/toy", "study/qwen/pools/toy"):
            [pool_root] = [path.parent for path in (project / folder).glob("*/pool.json")]
            pool = Pool(pool_root)
            one_log_per_id(pool, ADMITTED)
            for item_id in ADMITTED:
                assert sorted(sample.sample_id for sample in pool.iter_samples(item_id)) == list(range(N_POOL))
        for folder in ("debates/toy", "critiques/toy_steps"):
            [root] = [path.parent for path in (project / folder).glob("*/ledger.json")]
            ledger = CallLedger(root)
            one_log_per_id(ledger, ADMITTED)
            assert all(ledger.records(item_id) for item_id in ADMITTED)
        live_roots = [path.parent for path in (project / "online" / "toy").glob("*/live.json")]
        assert len(live_roots) == 2  # the warmup's and method low's
        for root in live_roots:
            live = LiveLedger(root)
            one_log_per_id(live, ADMITTED)
            assert all(sorted(live.traces(item_id)) for item_id in ADMITTED)
        assert critic_replies(project / "grading/critic/toy_run") == len(ADMITTED)
        verified = run_script_here(project, TRACEVOTE_MAIN, ["ledger", "verify"], monkeypatch, capsys,
                                   without_api_keys=True)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert re.search(rf"^study/qwen/pools/toy/\S+: {len(ADMITTED)} logs, .*: ok$", verified.stdout, re.MULTILINE)


def critic_replies(critic_dir: Path) -> int:
    """The critic's stored replies, each read back: its calls are named "critic-<prompt digest>", never by an id
    from input, so each log's name is its item id (the manifest counts them finished)."""
    [root] = [path.parent for path in critic_dir.glob("*/ledger.json")]
    ledger = CallLedger(root)
    items = [log.stem for log in (root / ledger.LOGS).iterdir()]
    assert all(re.fullmatch(r"critic-[0-9a-f]{32}", item) for item in items)
    assert all(list(ledger.records(item)) == [0] for item in items)
    manifest = json.loads((critic_dir / "manifest.json").read_text())
    assert manifest["items"] == manifest["finished"] == len(items)
    return len(items)


def test_normalize_refuses_hostile_ids_as_a_process(tmp_path: Path) -> None:
    with watched(tmp_path) as outside:
        project = outside.project
        write_params(project / "params.yaml", stage_params(project))
        raw = project / "raw.jsonl"
        raw.write_text("".join(json.dumps(row) + "\n" for row in problem_rows(["p1", *map(outside.real, REFUSED)])))
        result = subprocess.run([sys.executable, str(REPO_ROOT / "stages" / "normalize.py"), "--dataset", "toy",
                                 "--raw", "raw.jsonl", "--out", "data/toy.jsonl"], cwd=project, env=project_env(),
                                capture_output=True, text=True, timeout=hang_guard_s())
        assert result.returncode == 2
        assert f"raw.jsonl: {len(REFUSED)} problem(s), nothing written:" in result.stderr
        assert "row 13: field 'id': id of 10240 characters is longer than 128" in result.stderr
        assert not (project / "data").exists()


def test_grading_takes_hostile_prediction_ids_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Prediction ids never name a file: the critic names its calls by a digest of the prompt."""
    ids = ["p1", "P1", "CON", "../../../../../escaped", "../../../../../../escaped", f"{TOP}/abs-target", "..",
           ".", "a/b", "a\\b", "nul\x00byte", "\uff50\uff11", "\u04401"]
    with watched(tmp_path) as outside:
        project = outside.project
        ids = [outside.real(item_id) for item_id in ids]
        write_params(project / "params.yaml", stage_params(project))
        (project / "gold.jsonl").write_text("".join(json.dumps(
            {"id": item_id, "question": f"What is {n} + 7?", "answer": f"{n} + 7 = {n + 7}\n#### {n + 7}"}) + "\n"
            for n, item_id in enumerate(ids)))
        (project / "preds.jsonl").write_text("".join(json.dumps(
            {"id": item_id, "thinking": f"{n} and 7 make {n + 7}.", "content": f"#### {n + 7}"}) + "\n"
            for n, item_id in enumerate(ids)))
        result = run_script_here(project, TRACEVOTE_MAIN, ["grade", "--dataset", "gsm8k", "--gold", "gold.jsonl",
                                                           "--pred-path", "preds.jsonl", "--id-key", "id",
                                                           "--enable-critic", "--json"], monkeypatch, capsys,
                                 without_api_keys=True)
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert (summary["correct"], summary["total"]) == (len(ids), len(ids))
        assert critic_replies(project / "grading/critic/cli") == len(ids)


def test_the_old_escape_is_refused(tmp_path: Path) -> None:
    """The issue's repro: `pool import --problems F` with id ../../../../../escaped destroyed the file there."""
    with watched(tmp_path) as outside:
        project = outside.project
        write_params(project / "params.yaml", yaml.safe_load(FIXTURE_PARAMS.read_text()))
        (project / "problems.jsonl").write_text(json.dumps(
            Problem("../../../../../escaped", "What is 3+4?", 7).to_record()) + "\n")
        (project / "samples.jsonl").write_bytes(sample_line("../../../../../escaped", 0))
        result = subprocess.run([sys.executable, "-m", "tracevote", "pool", "import", "samples.jsonl", "--problems",
                                 "problems.jsonl"], cwd=project, env=project_env(), capture_output=True, text=True,
                                timeout=hang_guard_s())
        assert result.returncode == 2
        assert result.stderr == ("error: problems.jsonl: line 1: field 'id': id '../../../../../escaped' is not of "
                                 "letters, digits, '.', '_', '-' (starting with a letter or digit)\n")
        assert project_files(project) == {"params.yaml", "problems.jsonl", "samples.jsonl"}
