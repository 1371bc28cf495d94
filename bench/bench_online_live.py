"""Live online DeepConf on the simulator over real HTTP streams: the tokens it generates against Cons@K at the same
budget, and the client CPU a streamed token costs against the non-streamed path a pool build takes.

The simulator runs as its own process (`python -m tracevote sim-server`, DeepSeek's wire format), so the client's
CPU is this process's alone. Per problem it draws a trace from its sample key alone, so pool sample i is live trace
i in full:
- The pool: traces 0..budget-1 of every problem, sampled non-streamed (ChatClient.sample, as build_pool does).
  Cons@budget spends every token of them.
- Per window (confidence.group_size) and method: the live run (sampling.live.run_live, warmup traces in full, the
  others streamed and closed at their first window below the threshold), scored as the replay scores the working
  set 0..budget-1 (deepconf.live_results), and checked trace by trace against the replay on the pool: the tokens
  kept must be the replay's (an AssertionError names the first trace that differs). The tokens the server
  generated are its own count (`/_stats` generated_tokens), beside those the client received and kept.
- Client CPU per token, streamed against non-streamed, over the same completions in interleaved rounds (no stop:
  every token of each trace crosses the wire both ways).
    python -m bench.run --only bench_online_live [--quick]
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import requests
import yaml

from bench.figures import Figure
from bench.measure import Run, interleaved
from tracevote.core.config_datasets import AnswersConfig
from tracevote.core.config_deepconf import ConfidenceConfig, DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, PricingConfig, SimConfig
from tracevote.core.profiles import PROFILES
from tracevote.deepconf.confidence import trace_measures
from tracevote.deepconf.live import LiveAnswers
from tracevote.deepconf.live_results import same_traces, score_problem
from tracevote.deepconf.online import OnlineTrace, spent_tokens
from tracevote.deepconf.voting import row_percentile
from tracevote.sampling.client import ChatClient
from tracevote.sampling.live import LiveRules, run_live
from tracevote.sampling.stream import stream_completion
from tracevote.store.live import LiveLedger, LiveTrace
from tracevote.store.records import ProblemTraces, Sample

REPO = Path(__file__).resolve().parents[1]
AIME_2025 = REPO.parent / "shared" / "data" / "aime_2025.jsonl"
DEMO_PROBLEMS = REPO / "src" / "tracevote" / "datasets" / "data" / "demo_problems.jsonl"
# problems, warmup, budget, windows, mean tokens of a trace, CPU rounds, traces per CPU round
SCALES = {"quick": (3, 4, 8, (32,), 200, 2, 6), "full": (30, 16, 256, (512, 2048), 3000, 3, 48)}
METHODS = {"low": 90.0}  # DeepConf-low: the paper's headline saving
CONCURRENCY = 8
TOP_K = 20
ANSWERS = AnswersConfig(fallback="none", truncated_fallback=False)
PRICING = PricingConfig(checked="2026-07", input_cache_miss=0.14, input_cache_hit=0.0028, output=0.28)


def problems(n: int) -> list[dict[str, Any]]:
    """AIME 2025 (../shared/data) when present, else the built-in demo problems, cycled to n."""
    source = AIME_2025 if AIME_2025.is_file() else DEMO_PROBLEMS
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    cycled = itertools.islice(itertools.cycle(rows), n)
    return [{"id": f"p{i:02d}", "problem": row.get("problem") or row["question"], "answer": int(row["answer"])}
            for i, row in enumerate(cycled)]


def messages(problem: dict[str, Any]) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{problem['problem']}\n\nPlease reason step by step, and put your final "
                                        f"answer within \\boxed{{}}."}]


@contextlib.contextmanager
def sim_server(rows: list[dict[str, Any]], mean_tokens: int, folder: Path) -> Iterator[str]:
    """`python -m tracevote sim-server` knowing the problems' answers, on a free port, for the block."""
    params = yaml.safe_load((REPO / "tests" / "fixtures" / "params.yaml").read_text(encoding="utf-8"))
    params["model"]["sim"] = {"seed": 0, "signal": 1.0, "accuracy": 0.45, "mean_tokens": mean_tokens,
                              "critique_noise": 0.3}
    (folder / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    (folder / "problems.jsonl").write_text("".join(json.dumps({**row, "meta": {}}) + "\n" for row in rows))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "tracevote", "sim-server", "--params", "params.yaml", "--port",
                                str(port), "--problems", "problems.jsonl"], cwd=folder, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                requests.get(f"{url}/_stats", timeout=5)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the sim server did not start") from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=60)


def client(url: str, max_tokens: int) -> ChatClient:
    model = ModelConfig(backend="openai", base_url=url, name="deepseek-v4-flash", extra_body={},
                        api_key_env="BENCH_API_KEY", needs_key=False,
                        sim=SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=100), profile=PROFILES["deepseek"],
                        pricing=PRICING)
    return ChatClient(model, DecodingConfig(temperature=0.6, top_p=None, max_tokens=max_tokens, top_logprobs=TOP_K),
                      api_key=None, timeout_s=600.0, max_retries=2, concurrency=CONCURRENCY)


def generated(url: str) -> int:
    return sum(requests.get(f"{url}/_stats", timeout=30).json()["generated_tokens"].values())


def sample_pool(chat: ChatClient, rows: list[dict[str, Any]], budget: int) -> dict[str, list[Sample]]:
    """Traces 0..budget-1 of every problem, non-streamed (the sample keys a live run's traces carry)."""
    keys = [(row, i) for row in rows for i in range(budget)]
    with cf.ThreadPoolExecutor(CONCURRENCY) as pool:
        samples = list(pool.map(lambda key: chat.sample(messages(key[0]), problem_id=key[0]["id"], sample_id=key[1],
                                                        keep_top_logprobs=False), keys))
    by_problem: dict[str, list[Sample]] = {row["id"]: [] for row in rows}
    for sample in samples:
        by_problem[sample.problem_id].append(sample)
    return by_problem


def online_trace(samples: list[Sample], gold: int, group_size: int) -> OnlineTrace:
    confidence = [np.asarray(s.token_confidence, dtype=np.float32) for s in samples]
    offsets = np.concatenate(([0], np.cumsum([len(c) for c in confidence]))).astype(np.int64)
    measures = trace_measures(ProblemTraces("p", np.arange(len(samples)), [], [], offsets, np.concatenate(confidence)),
                              ConfidenceConfig(group_size, bottom_fraction=0.1, tail_tokens=group_size))
    traces = [LiveTrace(sample=s, stop_reason="finished", received=s.n_tokens, prompt_tokens=None,
                        completion_tokens=s.n_tokens, usage_source="server", threshold=None) for s in samples]
    codes = LiveAnswers(ANSWERS, {samples[0].problem_id: gold}, None)(samples[0].problem_id, traces)
    return OnlineTrace(codes=codes, gold_code=gold, lowest=measures.lowest,
                       n_tokens=np.array([s.n_tokens for s in samples], dtype=np.int64), stops=measures.stops)


def live_run(url: str, rows: list[dict[str, Any]], rules: LiveRules, folder: Path) -> tuple[dict, Run, int]:
    """The live run's traces by problem, its wall and client CPU, and the tokens the server generated for it."""
    warmup = LiveLedger.open_at(folder / "warmup", {"part": "warmup", "w": rules.group_size}, simulated=True)
    methods = {name: LiveLedger.open_at(folder / name, {"part": name, "w": rules.group_size}, simulated=True)
               for name in rules.percentiles}
    golds = {row["id"]: row["answer"] for row in rows}
    before = generated(url)
    wall, cpu = time.perf_counter(), time.process_time()
    with client(url, rules.max_tokens) as chat:
        run_live(chat, warmup, methods, {row["id"]: messages(row) for row in rows}, rules,
                 LiveAnswers(ANSWERS, golds, None), concurrency=CONCURRENCY, pricing=PRICING)
    elapsed = Run(time.perf_counter() - wall, time.process_time() - cpu)
    traces = {name: {row["id"]: warmup.traces(row["id"]) | ledger.traces(row["id"]) for row in rows}
              for name, ledger in methods.items()}
    return traces, elapsed, generated(url) - before


def check_against_replay(traces: dict[int, LiveTrace], trace: OnlineTrace, rules: LiveRules, percentile: float,
                         where: str) -> None:
    """Every live trace kept exactly the tokens the replay spends on it."""
    sets = np.arange(rules.budget)[None, :]
    threshold = row_percentile(trace.lowest[None, :rules.warmup], percentile)
    spent, _ = spent_tokens(trace, sets, threshold)
    spent[:, :rules.warmup] = trace.n_tokens[:rules.warmup]
    for i in range(rules.budget):
        if traces[i].sample.n_tokens != spent[0, i]:
            raise AssertionError(f"{where} trace {i}: live kept {traces[i].sample.n_tokens} tokens, the replay "
                                 f"spends {spent[0, i]}")


def cpu_rounds(url: str, rows: list[dict[str, Any]], n_traces: int, rounds: int, max_tokens: int) -> dict[str, list]:
    """Client CPU and wall of the same completions, non-streamed and streamed (no stop), in interleaved rounds."""
    keys = [(rows[i % len(rows)], 10_000 + i) for i in range(n_traces)]  # keys no other part of the bench uses
    tokens: dict[str, int] = {}

    def side(streamed: bool) -> Run:
        with client(url, max_tokens) as chat, cf.ThreadPoolExecutor(CONCURRENCY) as pool:
            def one(key: tuple[dict[str, Any], int]) -> int:
                if streamed:
                    return stream_completion(chat, messages(key[0]), sample_key=f"{key[0]['id']}/{key[1]}").n_tokens
                return chat.sample(messages(key[0]), problem_id=key[0]["id"], sample_id=key[1],
                                   keep_top_logprobs=False).n_tokens
            wall, cpu = time.perf_counter(), time.process_time()
            count = sum(pool.map(one, keys))
            run = Run(time.perf_counter() - wall, time.process_time() - cpu)
        tokens["streamed" if streamed else "plain"] = count
        return run

    runs = interleaved({"plain": lambda: side(False), "streamed": lambda: side(True)}, rounds)
    if tokens["plain"] != tokens["streamed"]:
        raise AssertionError(f"streamed {tokens['streamed']} tokens, non-streamed {tokens['plain']}: not the same "
                             f"completions")
    return {"runs": runs, "tokens": tokens["plain"]}


def run(scale: str = "full") -> list[dict[str, Any]]:
    n, warmup, budget, windows, mean_tokens, rounds, cpu_traces = SCALES[scale]
    rows = problems(n)
    max_tokens = 4 * mean_tokens
    figures: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch, sim_server(rows, mean_tokens, Path(scratch)) as url:
        with client(url, max_tokens) as chat:
            pool = sample_pool(chat, rows, budget)
        golds = {row["id"]: row["answer"] for row in rows}
        cons_tokens = sum(s.n_tokens for samples in pool.values() for s in samples) / n
        for window in windows:
            rules = LiveRules(warmup=warmup, budget=budget, percentiles=METHODS, group_size=window, consensus=None,
                              max_tokens=max_tokens)
            traces, elapsed, server_tokens = live_run(url, rows, rules, Path(scratch) / f"w{window}")
            figures += window_figures(traces, pool, golds, rules, elapsed, server_tokens, cons_tokens, n)
        cpu = cpu_rounds(url, rows, cpu_traces, rounds, max_tokens)
    figures.append(cpu_figure(cpu["runs"], cpu["tokens"], f"{cpu_traces} completions of ~{mean_tokens} tokens, "
                                                          f"top-{TOP_K}, {CONCURRENCY} in flight; {rounds} "
                                                          f"interleaved rounds").to_json())
    return figures


def window_figures(traces: dict, pool: dict[str, list[Sample]], golds: dict[str, int], rules: LiveRules,
                   elapsed: Run, server_tokens: int, cons_tokens: float, n: int) -> list[dict[str, Any]]:
    """Per method: completion tokens per problem, the live run's (generated by the server, received, kept) against
    Cons@budget on the same traces, and the accuracy of each, after checking every trace against the replay."""
    figures = []
    for name, percentile in rules.percentiles.items():
        live, same = [], []
        for pid, samples in pool.items():
            by_index = traces[name][pid]
            trace = online_trace(samples, golds[pid], rules.group_size)
            check_against_replay(by_index, trace, rules, percentile, f"window {rules.group_size}, {name}, {pid}")
            ordered = [by_index[i] for i in range(rules.budget)]
            live.append(score_problem(pid, name, percentile, ordered, warmup=rules.warmup, group_size=rules.group_size,
                                      consensus=None, answers=LiveAnswers(ANSWERS, golds, None), tie_break="smallest"))
            same.append(same_traces(trace, pid, rules.budget, {name: percentile}, rules.warmup, None, "smallest"))
        received, kept = sum(p.received for p in live) / n, sum(p.kept for p in live) / n
        accuracy, cons_accuracy = (100 * sum(p.correct for p in live) / n, 100 * sum(s.cons_correct for s in same) / n)
        note = (f"{n} problems, warmup {rules.warmup}, budget {rules.budget}, window {rules.group_size}; "
                f"live generated {server_tokens / n:,.0f} (server's count, both methods' traces if several), "
                f"received {received:,.0f}, kept {kept:,.0f} tokens per problem (kept = the replay's, trace by "
                f"trace); {sum(p.stopped for p in live)} of {n * (rules.budget - rules.warmup)} streamed traces "
                f"stopped; accuracy {accuracy:.1f}% live, {cons_accuracy:.1f}% Cons@{rules.budget}; "
                f"{elapsed.wall:.0f} s wall, {elapsed.cpu:.0f} s client CPU")
        figures.append(Figure(f"live online_{name} (window {rules.group_size}): completion tokens per problem",
                              "tokens", [received], [cons_tokens], higher_is_better=False,
                              baseline_name=f"Cons@{rules.budget} on the same traces", note=note).to_json())
    return figures


def cpu_figure(runs: dict[str, list[Run]], tokens: int, note: str) -> Figure:
    streamed, plain = runs["streamed"], runs["plain"]
    return Figure("live: client CPU per token, streamed", "tokens/s", [tokens / r.wall for r in streamed],
                  [tokens / r.wall for r in plain], cpu=[tokens / r.cpu for r in streamed],
                  baseline_cpu=[tokens / r.cpu for r in plain], cpu_unit="tokens/CPU-s",
                  baseline_name="the same completions non-streamed (ChatClient.sample, as build_pool)", note=note)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "quick"), indent=1))
