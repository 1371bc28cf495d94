"""tracevote against the real engine: llama.cpp's server (llama-cpp-python) running the shipped tinymath model.

Skipped, with the reason, where the engine is not installed (`make engine` installs it; .ci/run does).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import pytest
import requests

from bench import real_live
from tests.conftest import hang_guard_s, wait_for
from tests.dvcproject import copy_project
from tests.engine.standin import terminal_job_signals
from tests.gate_proxy import DIRECT, gate_proxy
from tracevote.cli import real
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import DataError
from tracevote.core.profiles import PROFILES
from tracevote.engine.llamacpp import EngineServer, llamacpp_server, missing_engine_reason, read_counts
from tracevote.engine.processes import live_members
from tracevote.sampling.client import ChatClient
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.stream import stream_completion
from tracevote.store.pool import read_manifest
from tracevote.store.records import Sample

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / real.MODEL
FIXTURES = REPO / "tests" / "fixtures" / "llamacpp"
# .ci/run sets TRACEVOTE_REQUIRE_ENGINE after `make engine`: there a missing engine fails these tests, not skips them
pytestmark = pytest.mark.skipif(missing_engine_reason() is not None and not os.environ.get("TRACEVOTE_REQUIRE_ENGINE"),
                                reason=str(missing_engine_reason()))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> EngineServer:
    """One server for the module, counting the tokens it generates (as `make real` starts it; the counting changes
    no reply) for the tests that read its counts."""
    with llamacpp_server(MODEL, log=tmp_path_factory.mktemp("engine") / "engine.log", count_tokens=True) as server:
        yield server


def test_the_server_answers_under_its_alias_and_is_gone_after_the_block(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="inside the block"), \
            llamacpp_server(MODEL, log=tmp_path / "engine.log", model_alias="tiny") as server:
        models = requests.get(f"{server.base_url}/models", timeout=30, proxies=DIRECT).json()
        assert [entry["id"] for entry in models["data"]] == ["tiny"]
        pid = server.pid
        raise RuntimeError("an error inside the block")
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone, not only the server
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{server.base_url}/models", timeout=5, proxies=DIRECT)


def test_the_engine_runs_llama_cpp_on_one_thread(engine: EngineServer) -> None:
    """The server `make real` starts generates and reads prompts on one thread: on the tiny model a second one only
    spins at every step's barrier, doubling the engine's CPU (docs/real-model.md)."""
    argv = Path(f"/proc/{engine.pid}/cmdline").read_bytes().split(b"\0")
    options = dict(itertools.pairwise(argv))
    assert (options[b"--n_threads"], options[b"--n_threads_batch"]) == (b"1", b"1")


def test_a_server_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(DataError, match="exited with code") as caught, \
            llamacpp_server(broken, log=tmp_path / "engine.log"):
        pass
    assert "engine.log" in str(caught.value)


@pytest.mark.parametrize("name", ["chat_top20", "chat_top3", "chat_top1", "chat_top25", "chat_length"])
def test_a_recorded_reply_parses_to_the_sample_the_live_server_gives_now(engine: EngineServer, name: str) -> None:
    """The committed reply and the live server's reply to the same seeded request are the same sample: same tokens
    and text, logprobs and confidence equal to float32 rounding (the fixtures stay true of the engine)."""
    fixture = orjson.loads((FIXTURES / f"{name}.json").read_bytes())
    request = fixture["request"]
    if "seed" not in request:
        pytest.skip(f"{name}: the recorded request carries no seed, so the live reply may differ")
    live = requests.post(f"{engine.base_url}/chat/completions", json=request, timeout=120, proxies=DIRECT)
    k = int(request.get("top_logprobs", 0))
    recorded_sample, live_sample = (parse(body, k) for body in (orjson.dumps(fixture["reply"]), live.content))
    assert live_sample.tokens == recorded_sample.tokens and live_sample.text == recorded_sample.text
    assert live_sample.finish_reason == recorded_sample.finish_reason
    np.testing.assert_allclose(live_sample.token_logprobs, recorded_sample.token_logprobs, atol=1e-4)
    np.testing.assert_allclose(live_sample.token_confidence, recorded_sample.token_confidence, atol=1e-3)


def parse(body: bytes, k: int) -> Sample:
    return parse_completion(body, problem_id="p", sample_id=0, latency_s=0.0, keep_top_logprobs=True,
                            expect_top_logprobs=k)


def test_a_pool_killed_mid_build_resumes_to_the_pool_an_uninterrupted_build_makes(engine: EngineServer,
                                                                                  tmp_path: Path) -> None:
    """SIGKILL while requests wait at a gate, resume: only the missing samples are requested, and the pool is the
    one a build without the kill gives (decoding.seed makes each trace repeatable on this engine)."""
    run = real.RealRun(problems=4, traces=8, debates=1, method="deepconf")
    total = run.problems * run.traces
    with gate_proxy(engine.base_url.removesuffix("/v1")) as (proxy_url, gate):
        behind_proxy = EngineServer(f"{proxy_url}/v1", engine.model_alias, engine.pid, engine.log)
        killed = scratch_project(tmp_path / "killed", run, behind_proxy)
        whole = copy_project(killed, tmp_path / "whole" / "real")  # the same project, prepared once
        gate.hold_after(10)
        build = dvc(killed, "repro", "build_pool@tinymath", background=True)
        gate.wait_for_waiting(1)
        os.killpg(build.pid, signal.SIGKILL)
        build.wait(timeout=hang_guard_s())
        stored = len(pool_samples(killed))
        assert 0 < stored < total
        gate.release()
        gate.reset()
        dvc(killed, "repro", "build_pool@tinymath")
        resumed_requests = gate.posts
        gate.reset()
        dvc(whole, "repro", "build_pool@tinymath")
    assert resumed_requests == total - stored
    whole_requests = gate.posts
    resumed, uninterrupted = pool_samples(killed), pool_samples(whole)
    assert sorted(resumed) == sorted(uninterrupted) and len(resumed) == total
    for key, sample in uninterrupted.items():
        again = resumed[key]
        assert again.tokens == sample.tokens and again.answer == sample.answer, key
        np.testing.assert_allclose(again.token_confidence, sample.token_confidence, atol=1e-3)
    assert whole_requests > total  # every sample once, and the probe before them


def scratch_project(where: Path, run: real.RealRun, server: EngineServer) -> Path:
    """The `make real` project for `run` against `server`, its problems fetched and normalized."""
    project = where / "real"
    project.mkdir(parents=True)
    real.prepare(copy_of_repo(where / "repo"), project, run, server)
    dvc(project, "init", "--no-scm", "-q")
    dvc(project, "repro", "normalize@tinymath")
    return project


def dvc(project: Path, *command: str, background: bool = False) -> subprocess.Popen[bytes] | None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = subprocess.Popen([sys.executable, "-m", "dvc", *command], cwd=project, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    if background:
        return process
    output, _ = process.communicate(timeout=hang_guard_s())
    assert process.returncode == 0, output.decode(errors="replace")[-3000:]
    return None


def pool_samples(project: Path) -> dict[tuple[str, int], Sample]:
    from tracevote.store.pool import Pool

    roots = [path for path in (project / "pools" / "tinymath").iterdir() if path.is_dir()]
    assert len(roots) == 1, roots
    pool = Pool.open_at(roots[0], orjson.loads((roots[0] / Pool.META).read_bytes())["setting"], simulated=False)
    return {(problem, sample.sample_id): sample for problem in pool.problem_ids()
            for sample in pool.iter_samples(problem)}


def test_make_real_runs_every_method_on_the_engine_and_stops_it(tmp_path: Path) -> None:
    """`python -m tracevote real` at a tiny size: every method's report is written from the real model's replies,
    and the server it started is gone when it returns."""
    repo = copy_of_repo(tmp_path / "repo")
    completed = subprocess.run([sys.executable, "-m", "tracevote", "real", "--problems", "3", "--traces", "4",
                                "--debates", "1"], cwd=repo, capture_output=True, text=True, timeout=hang_guard_s(),
                               check=False)
    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-3000:]
    pid = int(completed.stdout.split("(pid ", 1)[1].split(")", 1)[0])
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    scratch = repo / "real"
    report = (scratch / "metrics" / "deepconf" / "tinymath" / "report.txt").read_text(encoding="utf-8")
    assert "Pass@1" in report and "AUROC" in report and "SIMULATED" not in report
    for path in ("metrics/debate.md", "metrics/critique.md", "metrics/grading.md"):
        assert (scratch / path).stat().st_size > 0, path
    manifest = read_manifest(scratch / "pools" / "tinymath.json")
    assert (manifest.n_pool, manifest.problems, manifest.samples, manifest.simulated) == (4, 3, 12, False)
    # the live run (at 4 traces all warmup): each trace streamed whole, the engine's count of it logged, its tokens
    # the pool's trace of the same key and seed
    warmup = real_live.compare(scratch, repo / "real-engine.log")["warmup"]
    assert (warmup.traces, warmup.unmatched, warmup.differ, dict(warmup.by_reason)) == (12, 0, [], {"finished": 12})
    assert warmup.received == warmup.kept == warmup.pool_tokens and warmup.ahead == [1] * 12  # and <|end|>


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=lambda sig: sig.name)
def test_make_real_stops_the_stage_then_the_engine_on_a_stop_signal(tmp_path: Path, sig: signal.Signals) -> None:
    """The terminal closing (SIGHUP), `kill` (SIGTERM) or Ctrl-C (SIGINT) reaching `python -m tracevote real` once
    the pool is being built on the engine: the stage and dvc, then the engine, are all gone when the command exits
    (128 + the signal's number)."""
    repo = copy_of_repo(tmp_path / "repo")
    log = repo / "real-engine.log"
    run = subprocess.Popen([sys.executable, "-m", "tracevote", "real", "--problems", "20", "--traces", "64",
                            "--method", "deepconf"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True, preexec_fn=terminal_job_signals)
    try:
        wait_for(lambda: bool(read_counts(log)), "the engine to answer the pool's first request")
        run.send_signal(sig)
        out, err = run.communicate(timeout=hang_guard_s())
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 128 + sig, (out + err)[-3000:]
    closing = err.strip().splitlines()[-1]
    stopped = re.fullmatch(rf"real: stopped by {sig.name}: `dvc repro report` \(pid (\d+)\) stopped, then "
                           r"llama.cpp's server \(pid (\d+)\) stopped", closing)
    assert stopped, err[-3000:]
    assert f"(pid {stopped.group(2)})" in out
    for pid in stopped.groups():
        assert live_members(int(pid)) == [], pid


def copy_of_repo(dest: Path) -> Path:
    """What `make real` reads of this repository (the pipeline, its sources, params.yaml, the model) under `dest`."""
    dest.mkdir(parents=True)
    for name in ("dvc.yaml", ".dvcignore", ".gitignore", "params.yaml", "stages", "src", "models"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(REPO / name, dest / name)
    return dest


def test_streams_in_flight_together_each_end_with_their_closing_chunk(engine: EngineServer) -> None:
    """llama-cpp-python ends a stream early, without its last chunk, whenever another request waits for the model,
    unless started with --interrupt_requests False (as tracevote.engine.llamacpp starts it): then every stream of a
    live run's concurrency ends whole, and a stream the client closes is logged as a disconnect."""
    client = ChatClient(engine_model(engine), DecodingConfig(temperature=0.6, top_p=None, max_tokens=256,
                                                             top_logprobs=5, seed=0),
                        api_key=None, timeout_s=120.0, max_retries=0, concurrency=4)
    messages = [[{"role": "user", "content": row["problem"]}] for row in held_out_rows(4)]
    with client, ThreadPoolExecutor(4) as pool:
        whole = list(pool.map(lambda m: stream_completion(client, m[1], sample_key=f"p/{m[0]}"),
                              enumerate(messages)))
        assert [s.finish_reason for s in whole] == ["stop"] * 4 and all(s.done for s in whole)
        before = engine.log.read_text(errors="replace").count("Disconnected from client")
        # every read handed over: held back (the default), this 41-token completion could all arrive within the
        # 0.1 s a batch waits, and the stop would come after the stream's end
        cut = stream_completion(client, messages[0], sample_key="p/0", batch_chunks=1, hold_s=None,
                                observer=lambda batch: "stop" if batch.offset + len(batch.tokens) >= 3 else None)
    assert cut.stop_reason == "confidence" and cut.usage_source == "client" and cut.n_tokens < whole[0].n_tokens
    wait_for(lambda: engine.log.read_text(errors="replace").count("Disconnected from client") > before,
             "the server to log the closed stream")


def engine_model(engine: EngineServer) -> ModelConfig:
    return ModelConfig(backend="openai", base_url=engine.base_url, name=engine.model_alias, extra_body={},
                       api_key_env="TINYMATH_API_KEY", needs_key=False, sim=SimConfig(seed=0, signal=1.0, accuracy=0.5,
                                                                                     mean_tokens=50),
                       profile=PROFILES["llama-cpp-python"], endpoint="tinymath")


def held_out_rows(n: int) -> list[dict]:
    path = REPO / "src" / "tracevote" / "datasets" / "data" / "tinymath_heldout.jsonl"
    return [orjson.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:n]]


def count_of(engine: EngineServer, key: str) -> dict | None:
    """The engine's count of the streamed completion of sample `key` (None until it has ended): the module's server
    counts every other test's completions too, so each is found by its key."""
    return next((count for count in read_counts(engine.log) if count["key"] == key), None)


def test_a_closed_stream_stops_the_engine_generating(engine: EngineServer) -> None:
    """The engine's own count (tracevote.engine.counting) of the tokens it sampled: a whole stream's tokens and its
    end-of-text token; for a stream the client closes after its first tokens, at least what the client received
    and far below the 1,000 tokens the completion would run to (its end-of-text token banned). The server pulls a
    streamed completion a chunk at a time as it sends it, so it can run ahead of the client only by what the
    connection buffers: it stops once it sees the client gone, however late the client reads."""
    decoding = DecodingConfig(temperature=0.6, top_p=None, max_tokens=LONG, top_logprobs=20, seed=0)
    model = engine_model(engine)
    endless = replace(model, extra_body={"logit_bias": {str(END_TOKEN): -100.0}})
    messages = [{"role": "user", "content": held_out_rows(1)[0]["problem"]}]
    with ChatClient(model, decoding, api_key=None, timeout_s=120.0, max_retries=0, concurrency=1) as client:
        whole = stream_completion(client, messages, sample_key="counted/0")
    wait_for(lambda: count_of(engine, "counted/0") is not None, "the server to count the whole stream")
    with ChatClient(endless, decoding, api_key=None, timeout_s=120.0, max_retries=0, concurrency=1) as client:
        cut = stream_completion(client, messages, sample_key="counted/1",
                                observer=lambda batch: "stop" if batch.offset + len(batch.tokens) >= 3 else None)
    wait_for(lambda: count_of(engine, "counted/1") is not None, "the server to count the closed stream")
    whole_count, cut_count = count_of(engine, "counted/0"), count_of(engine, "counted/1")
    assert whole.finish_reason == "stop" and whole_count["ended"] == "whole"
    assert whole_count["sampled"] == whole.n_tokens + 1  # the end-of-text token is sampled and never sent
    assert cut.stop_reason == "confidence" and cut.usage_source == "client" and cut.n_tokens >= 3
    assert cut_count["ended"] == "closed"
    assert cut.n_tokens <= cut_count["sampled"] < LONG // 2


LONG = 1000  # tokens a completion with its end-of-text token banned runs to
END_TOKEN = 4  # tinymath's <|end|> (llama_cpp.Llama.token_eos)
