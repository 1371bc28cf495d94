"""Live online DeepConf on the simulator over real HTTP streams: the tokens it generates against Cons@K at the same
budget, and the client CPU a streamed token costs against the non-streamed path a pool build takes.

The simulator runs as its own process (`python -m tracevote sim-server`, DeepSeek's wire format), so the client's
CPU is this process's alone. It makes each stream's tokens at a pace (PACE tokens a second) through a small send
buffer, as a real server generates them, so the tokens it generated past a closed stream are the few a real server
makes before it notices the close, not the socket buffers a server writing as fast as it can fills. Its traces
average 3,000 tokens (SimConfig.mean_tokens; lengths spread log-normally), as the paper's do, so a 2,048-token
window fits inside most of them (a trace shorter than one window never stops early). Per problem it draws a trace
from its sample key alone, so pool sample i is live trace i in full:
- The pool: traces 0..budget-1 of every problem, drawn from the same model in-process (no HTTP: the request the
  client sends, the response parsed as build_pool parses it). Cons@budget spends every token of them; the replay
  (deepconf.online.replay on the working set 0..budget-1) predicts the live run on them.
- The warmup: traces 0..warmup-1 of every problem streamed in full once (run_live with no method); every window
  and method reuses them from the ledger, as a rerun of build_online does.
- Per window (confidence.group_size) and method (low 90, high 10): the live run (sampling.live.run_live, the
  traces after the warmup streamed and closed at their first window below the threshold), scored as the replay
  scores the working set (deepconf.live_results), and checked against the replay trace by trace: the tokens kept
  must be those the replay spends (an AssertionError names the window, method, problem and trace). The tokens the
  server generated are its own count (`/_stats` generated_tokens, the warmup's included), beside those the client
  received and kept.
- Client CPU per token, streamed against non-streamed, over the same completions in interleaved rounds (no stop:
  every token of each trace crosses the wire both ways).
    python -m bench.run --only bench_online_live [--quick]
    python -m bench.bench_online_live full      the figures as JSON, and the table of docs/benchmarks.md on stderr
    python -m bench.bench_online_live full128   the same at budget 128 (the scale docs/benchmarks.md reports)
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import requests
import yaml

from bench.figures import Figure
from bench.measure import Run, interleaved, load_average
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
from tracevote.sampling.ingest import parse_completion
from tracevote.sampling.live import run_live
from tracevote.sampling.live_rules import LiveRules
from tracevote.sampling.stream import stream_completion
from tracevote.sim.model import SimModel
from tracevote.store.live import LiveLedger, LiveTrace
from tracevote.store.records import ProblemTraces, Sample

REPO = Path(__file__).resolve().parents[1]
AIME_2025 = REPO.parent / "shared" / "data" / "aime_2025.jsonl"
DEMO_PROBLEMS = REPO / "src" / "tracevote" / "datasets" / "data" / "demo_problems.jsonl"
# problems, warmup, budget, windows, mean tokens of a trace, CPU rounds, traces per CPU round
SCALES = {"quick": (3, 4, 8, (32,), 200, 1, 6), "small": (6, 16, 48, (512, 2048), 3000, 1, 8),
          "medium": (10, 16, 96, (512, 2048), 3000, 1, 8), "wide": (30, 16, 96, (512, 2048), 3000, 1, 8),
          "full": (30, 16, 256, (512, 2048), 3000, 3, 48), "full128": (30, 16, 128, (512, 2048), 3000, 1, 8)}
METHODS = {"low": 90.0, "high": 10.0}  # DeepConf-low keeps the top 10% of the warmup, DeepConf-high 90%
CONCURRENCY = 8
# the server's generation pace per stream and its send buffer (sim-server --tokens-per-second, --send-buffer): as a
# real server, it is a few tokens past the client when a stream is closed, not the ~1 MB of socket buffers ahead
# that a server writing as fast as the socket takes is
PACE = 3000
SEND_BUFFER = 8192
TOP_K = 20
ANSWERS = AnswersConfig(fallback="none", truncated_fallback=False)
PRICING = PricingConfig(checked="2026-07", input_cache_miss=0.14, input_cache_hit=0.0028, output=0.28)


def sim_config(mean_tokens: int) -> SimConfig:
    return SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=mean_tokens, critique_noise=0.3)


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
    params["model"]["sim"] = dataclasses.asdict(sim_config(mean_tokens))
    (folder / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    (folder / "problems.jsonl").write_text("".join(json.dumps({**row, "meta": {}}) + "\n" for row in rows))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "tracevote", "sim-server", "--params", "params.yaml", "--port",
                                str(port), "--problems", "problems.jsonl", "--tokens-per-second", str(PACE),
                                "--send-buffer", str(SEND_BUFFER)], cwd=folder, stdout=subprocess.DEVNULL,
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


def sim_model(rows: list[dict[str, Any]], mean_tokens: int) -> SimModel:
    """The model sim_server runs (its config; the problems' answers as `--problems` gives them), in-process."""
    return SimModel(sim_config(mean_tokens), answer_sets=[{row["problem"]: row["answer"] for row in rows}])


def pool_samples(model: SimModel, row: dict[str, Any], budget: int, max_tokens: int) -> list[Sample]:
    """Traces 0..budget-1 of one problem in full, drawn in-process from the sample keys a live run's traces carry
    ("<problem>/<i>"): the request the client sends, the response parsed as build_pool parses it."""
    body = client("http://127.0.0.1:9", max_tokens).request_body(messages(row))  # only the body: nothing is sent
    return [parse_completion(model.complete_bytes(body, f"{row['id']}/{i}"), problem_id=row["id"], sample_id=i,
                             latency_s=0.0, keep_top_logprobs=False, expect_top_logprobs=TOP_K) for i in range(budget)]


def pool_traces(model: SimModel, rows: list[dict[str, Any]], budget: int, max_tokens: int,
                windows: tuple[int, ...]) -> dict[int, dict[str, OnlineTrace]]:
    """Every problem's pool_samples as the replay reads them at each window (the samples are not kept)."""
    online: dict[int, dict[str, OnlineTrace]] = {window: {} for window in windows}
    for row in rows:
        samples = pool_samples(model, row, budget, max_tokens)
        for window in windows:
            online[window][row["id"]] = online_trace(samples, row["answer"], window)
    return online


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


@dataclass(frozen=True)
class Phase:
    """One run_live call: the tokens the server generated for it (its own count), its wall and client CPU."""

    generated: int
    elapsed: Run


@dataclass(frozen=True)
class MethodResult:
    """One live method at one window, per problem on average, beside Cons@budget and the replay on the same traces."""

    window: int
    method: str
    percentile: float
    generated: float  # by the server for the live run: the warmup's and this method's streams
    received: float
    kept: float
    replay_tokens: float
    cons_tokens: float
    accuracy: float
    replay_accuracy: float
    cons_accuracy: float
    stopped: int
    streamed: int
    warmup: Phase
    streams: Phase


def live_phase(url: str, rows: list[dict[str, Any]], rules: LiveRules, warmup: LiveLedger,
               methods: dict[str, LiveLedger]) -> Phase:
    """run_live over HTTP streams for `methods` (none: the warmup alone), measured."""
    golds = {row["id"]: row["answer"] for row in rows}
    before = generated(url)
    wall, cpu = time.perf_counter(), time.process_time()
    with client(url, rules.max_tokens) as chat:
        run_live(chat, warmup, methods, {row["id"]: messages(row) for row in rows}, rules,
                 LiveAnswers(ANSWERS, golds, None), concurrency=CONCURRENCY, pricing=PRICING)
    elapsed = Run(time.perf_counter() - wall, time.process_time() - cpu)
    return Phase(generated(url) - before, elapsed)


def check_against_replay(traces: dict[int, LiveTrace], trace: OnlineTrace, rules: LiveRules, percentile: float,
                         where: str) -> None:
    """Every live trace kept exactly the tokens the replay spends on it (replay's own spent_tokens)."""
    sets = np.arange(rules.budget)[None, :]
    threshold = row_percentile(trace.lowest[None, :rules.warmup], percentile)
    spent, _ = spent_tokens(trace, sets, threshold)
    spent[:, :rules.warmup] = trace.n_tokens[:rules.warmup]
    for i in range(rules.budget):
        if traces[i].sample.n_tokens != spent[0, i]:
            raise AssertionError(f"{where} trace {i}: live kept {traces[i].sample.n_tokens} tokens, the replay "
                                 f"spends {spent[0, i]}")


def method_result(rows: list[dict[str, Any]], online: dict[str, OnlineTrace], rules: LiveRules, name: str,
                  ledgers: tuple[LiveLedger, LiveLedger], warmup: Phase, streams: Phase) -> MethodResult:
    """Score the live method (its traces read back from the warmup's and its own ledger, one problem at a time) as
    the replay scores the working set 0..budget-1, after checking every trace."""
    percentile, n = rules.percentiles[name], len(rows)
    golds = {row["id"]: row["answer"] for row in rows}
    live, same = [], []
    for row in rows:
        pid = row["id"]
        traces = ledgers[0].traces(pid) | ledgers[1].traces(pid)
        check_against_replay(traces, online[pid], rules, percentile, f"window {rules.group_size}, {name}, {pid}")
        ordered = [traces[i] for i in range(rules.budget)]
        live.append(score_problem(pid, name, percentile, ordered, warmup=rules.warmup, group_size=rules.group_size,
                                  consensus=None, answers=LiveAnswers(ANSWERS, golds, None), tie_break="smallest"))
        same.append(same_traces(online[pid], pid, rules.budget, {name: percentile}, rules.warmup, None, "smallest"))
        if live[-1].kept != same[-1].replay_tokens[name]:
            raise AssertionError(f"window {rules.group_size}, {name}, {pid}: live kept {live[-1].kept} tokens, the "
                                 f"replay spends {same[-1].replay_tokens[name]:.0f}")
    return MethodResult(
        window=rules.group_size, method=name, percentile=percentile,
        generated=(warmup.generated + streams.generated) / n, received=sum(p.received for p in live) / n,
        kept=sum(p.kept for p in live) / n, replay_tokens=sum(s.replay_tokens[name] for s in same) / n,
        cons_tokens=sum(s.cons_tokens for s in same) / n, accuracy=100 * sum(p.correct for p in live) / n,
        replay_accuracy=100 * sum(s.replay_correct[name] for s in same) / n,
        cons_accuracy=100 * sum(s.cons_correct for s in same) / n, stopped=sum(p.stopped for p in live),
        streamed=n * (rules.budget - rules.warmup), warmup=warmup, streams=streams)


def cpu_rounds(url: str, rows: list[dict[str, Any]], n_traces: int, rounds: int, max_tokens: int) -> dict[str, list]:
    """Client CPU and wall of the same completions, non-streamed and streamed (no stop), in interleaved rounds."""
    keys = [(rows[i % len(rows)], 10_000 + i) for i in range(n_traces)]  # keys no other part of the bench uses
    tokens: dict[str, int] = {}

    def side(streamed: bool) -> Run:
        with client(url, max_tokens) as chat, cf.ThreadPoolExecutor(CONCURRENCY) as pool:
            def one(key: tuple[dict[str, Any], int]) -> int:
                if streamed:
                    return stream_completion(chat, messages(key[0]), sample_key=f"{key[0]['id']}/{key[1]}",
                                             keep_top_logprobs=False).n_tokens
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
    figures, _ = measure(scale)
    return figures


def measure(scale: str) -> tuple[list[dict[str, Any]], list[MethodResult]]:
    n, warmup, budget, windows, mean_tokens, rounds, cpu_traces = SCALES[scale]
    rows = problems(n)
    max_tokens = 4 * mean_tokens
    results: list[MethodResult] = []
    with tempfile.TemporaryDirectory() as scratch, sim_server(rows, mean_tokens, Path(scratch)) as url:
        pool_started = Run(time.perf_counter(), time.process_time())
        online = pool_traces(sim_model(rows, mean_tokens), rows, budget, max_tokens, windows)
        pool_elapsed = Run(time.perf_counter() - pool_started.wall, time.process_time() - pool_started.cpu)
        progress(f"pool of {n} x {budget} sampled in-process in {pool_elapsed.wall:.0f} s")
        # the warmup traces run in full whatever the window: one warmup ledger serves every window and method
        warmup_ledger = LiveLedger.open_at(Path(scratch) / "warmup", {"part": "warmup"}, simulated=True)
        warmup_phase: Phase | None = None
        for window in windows:
            rules = LiveRules(warmup=warmup, budget=budget, percentiles=METHODS, group_size=window, consensus=None,
                              max_tokens=max_tokens)
            if warmup_phase is None:
                warmup_phase = live_phase(url, rows, replace(rules, percentiles={}), warmup_ledger, {})
                progress(f"warmup streamed: {warmup_phase.generated:,} tokens generated in "
                         f"{warmup_phase.elapsed.wall:.0f} s ({warmup_phase.elapsed.cpu:.0f} s client CPU)")
            for name, percentile in METHODS.items():
                ledger = LiveLedger.open_at(Path(scratch) / f"w{window}-{name}", {"part": name, "w": window},
                                            simulated=True)
                method_rules = replace(rules, percentiles={name: percentile})
                streams = live_phase(url, rows, method_rules, warmup_ledger, {name: ledger})
                results.append(method_result(rows, online[window], method_rules, name, (warmup_ledger, ledger),
                                             warmup_phase, streams))
                progress(table(results[-1:]).splitlines()[-1])
        cpu = cpu_rounds(url, rows, cpu_traces, rounds, max_tokens)
    setting = (f"{n} problems, warmup {warmup}, budget {budget}, traces of ~{mean_tokens} tokens (max_tokens "
               f"{max_tokens}), top-{TOP_K}, T=0.6, {CONCURRENCY} streams at once; the pool for Cons@{budget} and the "
               f"replay sampled in-process in {pool_elapsed.wall:.0f} s")
    figures = [result_figure(result, setting).to_json() for result in results]
    figures.append(cpu_figure(cpu["runs"], cpu["tokens"], f"{cpu_traces} completions of ~{mean_tokens} tokens, "
                                                          f"top-{TOP_K}, {CONCURRENCY} in flight; {rounds} "
                                                          f"interleaved rounds").to_json())
    return figures, results


def progress(line: str) -> None:
    """One line on stderr as a phase ends, so a run stopped part way still shows what it measured."""
    print(f"{time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def saving(tokens: float, cons_tokens: float) -> float:
    return 100 * (1 - tokens / cons_tokens) if cons_tokens else 0.0


def result_figure(r: MethodResult, setting: str) -> Figure:
    """Completion tokens per problem the server generated for the live run, against Cons@budget on the same traces."""
    note = (f"{setting}; window {r.window}: generated {r.generated:,.0f} (server's count, warmup included), "
            f"received {r.received:,.0f}, kept {r.kept:,.0f} = replay {r.replay_tokens:,.0f}, Cons "
            f"{r.cons_tokens:,.0f} tokens per problem (saving {saving(r.generated, r.cons_tokens):.1f}%); "
            f"{r.stopped} of {r.streamed} streamed traces stopped; accuracy live {r.accuracy:.1f}%, replay "
            f"{r.replay_accuracy:.1f}%, Cons {r.cons_accuracy:.1f}%; streams {r.streams.elapsed.wall:.0f} s wall, "
            f"{r.streams.elapsed.cpu:.0f} s client CPU (warmup {r.warmup.elapsed.wall:.0f} s, "
            f"{r.warmup.elapsed.cpu:.0f} s)")
    return Figure(f"live online_{r.method} (window {r.window}): completion tokens per problem", "tokens",
                  [r.generated], [r.cons_tokens], higher_is_better=False,
                  baseline_name="Cons@K on the same traces", note=note)


def table(results: list[MethodResult]) -> str:
    """The results as a markdown table (docs/benchmarks.md): per window, Cons@K once, then each method's replay
    and live run."""
    lines = ["| window | method | accuracy | completion tokens per problem | saving vs Cons@K | traces stopped | "
             "wall (client CPU) |", "|---|---|---|---|---|---|---|"]
    for window in dict.fromkeys(r.window for r in results):
        of_window = [r for r in results if r.window == window]
        first = of_window[0]
        lines.append(f"| {window} | Cons@K | {first.cons_accuracy:.1f}% | {first.cons_tokens:,.0f} | — | — | — |")
        for r in of_window:
            lines.append(f"| {window} | online_{r.method} ({r.percentile:g}), replay | {r.replay_accuracy:.1f}% | "
                         f"{r.replay_tokens:,.0f} | {saving(r.replay_tokens, r.cons_tokens):.1f}% | — | — |")
            lines.append(f"| {window} | online_{r.method} ({r.percentile:g}), live | {r.accuracy:.1f}% | "
                         f"generated {r.generated:,.0f}, received {r.received:,.0f}, kept {r.kept:,.0f} | "
                         f"{saving(r.generated, r.cons_tokens):.1f}% | {r.stopped} of {r.streamed} | "
                         f"{r.warmup.elapsed.wall + r.streams.elapsed.wall:.0f} s "
                         f"({r.warmup.elapsed.cpu + r.streams.elapsed.cpu:.0f} s) |")
    return "\n".join(lines)


def cpu_figure(runs: dict[str, list[Run]], tokens: int, note: str) -> Figure:
    streamed, plain = runs["streamed"], runs["plain"]
    return Figure("live: client CPU per token, streamed", "tokens/s", [tokens / r.wall for r in streamed],
                  [tokens / r.wall for r in plain], cpu=[tokens / r.cpu for r in streamed],
                  baseline_cpu=[tokens / r.cpu for r in plain], cpu_unit="tokens/CPU-s",
                  baseline_name="the same completions non-streamed (ChatClient.sample, as build_pool)", note=note)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    scale = sys.argv[1] if len(sys.argv) > 1 else "quick"
    started = load_average()
    rows, results = measure(scale)
    print(json.dumps(rows, indent=1))
    print(f"{table(results)}\n\nload average {started:.2f} at start, {load_average():.2f} at end", file=sys.stderr)
