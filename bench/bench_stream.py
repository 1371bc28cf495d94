"""Client CPU per token of a streamed completion (sampling.stream) against today's non-streamed ingest path.

The same completions both ways: the simulated model's 3,000-token responses with top-20 logprobs in DeepSeek's
exact layout (bench_ingest.sim_bodies), and each one written again as the stream DeepSeek sends (a role chunk, one
chunk per token, a finish chunk with the usage, data: [DONE]). The non-streamed side is parse_completion on the
body (ingest_fast); the streamed side is sampling.stream.read_stream on the stream's bytes, given as the client
reads them: one chunk per read (a live stream; also every read from a server using chunked transfer encoding,
as http.client's read1 returns at most one HTTP chunk, and servers send an event per HTTP chunk), 64 KiB and
1 MiB reads (a server without chunked encoding, with the client behind), and one chunk per read with the
observer called every 16 or HOLD_CHUNKS chunks (batch_chunks; HOLD_CHUNKS is stream_completion's default, here
without its time bound since the bytes are all there). No HTTP on either side. Every side runs in the same process
on the same completions, in interleaved rounds (median, min, max; wall and CPU).

Then over real HTTP: the simulator as its own process (`python -m tracevote sim-server`, DeepSeek's layout, the same
3,000-token mean), its completions fetched one at a time by ChatClient.sample non-streamed and by stream_completion
(with no observer, as a live run's stream far from a possible stop is read: tokens held back up to HOLD_CHUNKS chunks
or HOLD_S; and handed over every read, batch_chunks=1 without the time bound, as before), interleaved; CPU is this
process's alone (time.process_time), so the server's is not counted, and both sides pay their HTTP. The issue's bar:
the streamed sides' CPU per token no more than the non-streamed side's.

Then a slow server: the simulator in this process (sim.server.running_server) writing one chunk per 1/PACED_RATE s
(the pace hook sleeps), its completions streamed every read and held back (stream_completion's defaults, no
observer), interleaved; CPU is the client thread's alone (time.thread_time). Beside it, one stream per side closed by
an observer at token PACED_STOP: the tokens the client received and the server generated (its own count, /_stats)
past it.
    python -m bench.run --only bench_stream [--quick]
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import requests

from bench.bench_ingest import TOP_K, fast, sim_bodies
from bench.bench_online_live import client, messages, problems, sim_model, sim_server
from bench.figures import Figure
from bench.measure import Run, interleaved, timed
from tracevote.sampling.stream import HOLD_CHUNKS, TokenBatch, read_stream, stream_completion
from tracevote.sim.server import ServerOptions, running_server

SCALES = {"quick": (1, 300, 1), "full": (2, 3000, 5)}  # completions, tokens each, rounds
HTTP_SCALES = {"quick": (2, 300, 1), "full": (6, 3000, 5)}  # completions, mean tokens, rounds
HTTP_BASELINE = "http_nonstreamed_ChatClient.sample"
BASELINE = "stream_baseline_nonstreamed_ingest"
EVERY_READ = "http_stream_completion_every_read"
PACED_SCALES = {"quick": (1, 300, 1), "full": (2, 1000, 3)}  # completions, mean tokens, rounds
PACED_RATE = 1000.0  # chunks a second the slow server writes (a fast single stream of a real server)
PACED_STOP = 200  # the token at which the stop measurement's observer closes the stream
READS = {"stream_one_chunk_per_read": None, "stream_64KiB_reads": 1 << 16, "stream_1MiB_reads": 1 << 20}
BATCHES = (16, HOLD_CHUNKS)  # one chunk per read, the observer called every n chunks (batch_chunks=n)


def as_stream(body: bytes) -> list[bytes]:
    """The completion as DeepSeek streams it, one server-sent event per element."""
    doc = orjson.loads(body)
    choice = doc["choices"][0]
    head = {key: doc[key] for key in ("id", "created", "model") if key in doc} | {"object": "chat.completion.chunk"}

    def event(delta: dict[str, Any], logprobs: Any, finish: str | None, **extra: Any) -> bytes:
        chunk = head | {"choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(chunk | extra) + b"\n\n"

    events = [event({"role": "assistant", "content": ""}, None, None)]
    events += [event({"content": item["token"]}, {"content": [item]}, None) for item in choice["logprobs"]["content"]]
    events.append(event({"content": ""}, None, choice["finish_reason"], usage=doc["usage"]))
    return [*events, b"data: [DONE]\n\n"]


def reads(events: list[bytes], size: int | None) -> list[bytes]:
    if size is None:
        return events
    stream = b"".join(events)
    return [stream[i:i + size] for i in range(0, len(stream), size)]


def check_agreement(body: bytes, events: list[bytes]) -> None:
    plain = fast(body)
    for size, batch in [*((size, 1) for size in READS.values()), *((None, batch) for batch in BATCHES)]:
        streamed = read_stream(reads(events, size), top_logprobs=TOP_K, batch_chunks=batch)
        if streamed.tokens != plain.tokens or not np.array_equal(streamed.token_confidence, plain.token_confidence,
                                                                 equal_nan=True):
            raise AssertionError(f"the streamed parse ({size} B reads) and ingest disagree")


def run(scale: str = "full") -> list[dict[str, Any]]:
    """Tokens per CPU second of each side over the same completions, rounds interleaved."""
    n, tokens, rounds = SCALES[scale]
    bodies = sim_bodies(n, tokens)
    streams = [as_stream(body) for body in bodies]
    for body, events in zip(bodies, streams, strict=True):
        check_agreement(body, events)
    pieces = {name: [reads(events, size) for events in streams] for name, size in READS.items()}
    methods: dict[str, Callable[[], Any]] = {BASELINE: lambda: [fast(body) for body in bodies]}
    for name, per_body in pieces.items():
        methods[name] = lambda per_body=per_body: [read_stream(p, top_logprobs=TOP_K) for p in per_body]
    for batch in BATCHES:
        methods[f"stream_one_chunk_per_read_batch_{batch}"] = lambda batch=batch: [
            read_stream(events, top_logprobs=TOP_K, batch_chunks=batch) for events in streams]
    runs = interleaved({name: (lambda method=method: timed(method)) for name, method in methods.items()}, rounds)
    total = sum(len(fast(body).tokens) for body in bodies)
    note = f"{n} completions x {tokens} tokens, top-{TOP_K}; {rounds} interleaved rounds"
    figures = [stream_figure(name, side, runs[BASELINE], total, note).to_json() for name, side in runs.items()]
    return figures + http_figures(scale) + paced_figures(scale)


def http_figures(scale: str) -> list[dict[str, Any]]:
    """Client CPU per token over loopback HTTP from the simulator, non-streamed against streamed, interleaved."""
    n, mean_tokens, rounds = HTTP_SCALES[scale]
    rows = problems(n)
    tokens: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as scratch, sim_server(rows, mean_tokens, Path(scratch)) as url, \
            client(url, 4 * mean_tokens) as chat:
        def side(name: str, fetch: Callable[[dict[str, Any]], int]) -> Callable[[], Run]:
            def one_round() -> Run:
                wall, cpu = time.perf_counter(), time.process_time()
                tokens[name] = sum(fetch(row) for row in rows)
                return Run(time.perf_counter() - wall, time.process_time() - cpu)
            return one_round

        sides = {
            HTTP_BASELINE: side(HTTP_BASELINE, lambda row: chat.sample(
                messages(row), problem_id=row["id"], sample_id=0, keep_top_logprobs=False).n_tokens),
            "http_stream_completion": side("http_stream_completion", lambda row: stream_completion(
                chat, messages(row), sample_key=f"{row['id']}/0", keep_top_logprobs=False).n_tokens),
            EVERY_READ: side(EVERY_READ, lambda row: stream_completion(
                chat, messages(row), sample_key=f"{row['id']}/0", keep_top_logprobs=False, batch_chunks=1,
                hold_s=None).n_tokens),
        }
        runs = interleaved(sides, rounds)
    if len(set(tokens.values())) != 1:
        raise AssertionError(f"the sides received different tokens: {tokens}")
    total = tokens[HTTP_BASELINE]
    note = (f"loopback HTTP from sim-server (its own process), {n} completions, {total} tokens, top-{TOP_K}, one at a "
            f"time; {rounds} interleaved rounds; CPU: this process (time.process_time)")
    return [Figure(f"streaming: {name}", "tokens/s", [total / r.wall for r in side_runs],
                   None if name == HTTP_BASELINE else [total / r.wall for r in runs[HTTP_BASELINE]],
                   cpu=[total / r.cpu for r in side_runs],
                   baseline_cpu=None if name == HTTP_BASELINE else [total / r.cpu for r in runs[HTTP_BASELINE]],
                   cpu_unit="tokens/CPU-s", baseline_name="ChatClient.sample on the same completions, non-streamed",
                   note=note).to_json() for name, side_runs in runs.items()]


def paced_figures(scale: str) -> list[dict[str, Any]]:
    """Client CPU per token against a slow server (PACED_RATE chunks a second), every read against held back; and
    the tokens past a stop at PACED_STOP that each side received and the server generated."""
    n, mean_tokens, rounds = PACED_SCALES[scale]
    rows = problems(n)
    options = ServerOptions(profile="deepseek", pace=lambda: time.sleep(1 / PACED_RATE))
    modes: dict[str, dict[str, Any]] = {"paced_every_read": {"batch_chunks": 1, "hold_s": None}, "paced_held": {}}
    tokens: dict[str, int] = {}
    past_stop: dict[str, tuple[int, int]] = {}
    with running_server(sim_model(rows, mean_tokens), options=options) as url, client(url, 4 * mean_tokens) as chat:
        def side(name: str) -> Callable[[], Run]:
            def one_round() -> Run:
                wall, cpu = time.perf_counter(), time.thread_time()
                tokens[name] = sum(stream_completion(chat, messages(row), sample_key=f"{row['id']}/0",
                                                     **modes[name]).n_tokens for row in rows)
                return Run(time.perf_counter() - wall, time.thread_time() - cpu)
            return one_round

        runs = interleaved({name: side(name) for name in modes}, rounds)
        for name, mode in modes.items():
            past_stop[name] = _past_stop(chat, url, rows[0], name, mode)
    if len(set(tokens.values())) != 1:
        raise AssertionError(f"the sides received different tokens: {tokens}")
    total = tokens["paced_every_read"]
    stops = "; ".join(f"{name}: {got} received, {made} generated past the stop" for name, (got, made) in
                      past_stop.items())
    note = (f"sim server in this process writing a chunk per {1000 / PACED_RATE:g} ms, {n} completions, {total} "
            f"tokens, top-{TOP_K}, one at a time; {rounds} interleaved rounds; CPU: the client thread "
            f"(time.thread_time); a stream closed at token {PACED_STOP}: {stops}")
    return [Figure(f"streaming: {name}", "tokens/s", [total / r.wall for r in side_runs],
                   None if name == "paced_every_read" else [total / r.wall for r in runs["paced_every_read"]],
                   cpu=[total / r.cpu for r in side_runs],
                   baseline_cpu=None if name == "paced_every_read" else [
                       total / r.cpu for r in runs["paced_every_read"]],
                   cpu_unit="tokens/CPU-s", baseline_name="the same streams handed over every read",
                   note=note).to_json() for name, side_runs in runs.items()]


def _past_stop(chat: Any, url: str, row: dict[str, Any], name: str, mode: dict[str, Any]) -> tuple[int, int]:
    """(tokens received, tokens the server generated) past token PACED_STOP of a stream closed there."""
    key = f"{row['id']}/stop-{name}"

    def observer(batch: TokenBatch) -> str | None:
        return "stop" if batch.offset + len(batch.tokens) >= PACED_STOP else None

    received = stream_completion(chat, messages(row), sample_key=key, observer=observer, **mode).n_tokens
    deadline = time.monotonic() + 60
    while True:  # the server counts a closed stream's tokens once its next write finds the client gone
        stats = requests.get(f"{url}/_stats", timeout=30).json()
        if stats["streams"].get("client gone", 0) >= len(_GONE) + 1 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    _GONE.append(key)
    return received - PACED_STOP, stats["generated_tokens"][key] - PACED_STOP


_GONE: list[str] = []  # streams closed so far in this process's paced server


def stream_figure(name: str, runs: list[Run], baseline: list[Run], total: int, note: str) -> Figure:
    own = runs is baseline
    return Figure(f"streaming: {name}", "tokens/s", [total / r.wall for r in runs],
                  None if own else [total / r.wall for r in baseline], cpu=[total / r.cpu for r in runs],
                  baseline_cpu=None if own else [total / r.cpu for r in baseline], cpu_unit="tokens/CPU-s",
                  baseline_name="parse_completion on the non-streamed body (ingest_fast)", note=note)
