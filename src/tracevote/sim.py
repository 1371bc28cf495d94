"""The simulated model: DeepSeek-format chat completions with boxed answers and top-k logprobs, in-process.

How one response is drawn; every draw is seeded by (cfg.seed, problem, sample_key), so the order and the
threads of requests never change a response:

1. The problem. Its gold answer comes from `answers`, else from a hash of the problem text. It draws a
   chance p ~ Beta(3a, 3(1-a)) that one trace is right (a = cfg.accuracy) and 2-4 distractor answers
   with uneven Dirichlet weights, so on hard problems the most common answer is wrong.
2. The trace. Right with chance p; else a distractor (15% of wrong traces: a scattered answer); 1% of
   traces box nothing. Its length is lognormal with mean cfg.mean_tokens; it ends "... \\boxed{N}",
   so a trace longer than the request's max_tokens is cut before its box (finish_reason "length").
3. The logprobs. A trace draws a latent confidence z ~ N(0, 0.8) + signal * (+0.5 right, -0.5 wrong),
   with signal = cfg.signal. Lower z means more "fork" tokens (flat top-k distributions) and more
   low-confidence stretches (48-320 tokens where forks are 5x as frequent). So token confidence
   C_i = -mean(top-k logprobs) tracks correctness with a strength set by signal: the AUROC of a
   trace's mean C_i for right vs wrong is ~0.5 at signal 0, ~0.77 at 1 and ~0.94 at 2 (1800-token
   traces). At signal 0 nothing about a trace (its confidence or its length) says whether it is right;
   otherwise wrong traces are also exp(0.2 * signal) times longer on average, as real ones are.

Temperature 0 emulates DeepSeek: one greedy trace per prompt (sample_key is ignored), chosen logprob 0.0
and -9999 for every other top-k entry. Logprob values are printed on a grid 0.4% apart, which keeps
generation vectorized: a 4096-token response with top-20 takes ~10 ms.
"""

from __future__ import annotations

import functools
import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import orjson

from tracevote.config import SimConfig

Degrade = Literal["none", "sentinel", "nologprobs"]  # fault modes the sim server asks for
MAX_TOP_LOGPROBS = 20
FINGERPRINT_PREFIX = "tracevote-sim"
CREATED = 1767225600  # a fixed timestamp keeps responses byte-identical across runs
PROMPT_SUFFIX = "\n\nPlease reason"

_CANDIDATES = 20  # candidates drawn per token; the request's top_logprobs shows the first k
_LENGTH_SIGMA = 0.45
_CONCENTRATION = 3.0  # of the per-problem Beta: lower spreads difficulties further
_NO_ANSWER = 0.01
_Z_SPREAD = 0.8  # of the latent confidence; long traces reach AUROC Phi(signal / (0.8 * sqrt 2))
_SCATTERED = 0.15
_STRETCH = (48, 320)  # low-confidence stretch lengths, tokens
_GRID = 256  # logprob grid steps per e-fold
_GRID_MIN = round(math.log(1e-7) * _GRID)  # magnitudes below 1e-7 print as 0.0
_GRID_MAX = round(math.log(100.0) * _GRID)


class SimRequestError(ValueError):
    """The request is not one the simulated model accepts; `status` is the HTTP code a server returns."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SimRequest:
    model: str
    prompt: str  # the last user message
    temperature: float
    max_tokens: int
    logprobs: bool
    top_logprobs: int


@dataclass(frozen=True)
class _Problem:
    gold: int
    p_correct: float
    distractors: tuple[int, ...]
    weights: tuple[float, ...]


@dataclass(frozen=True)
class _Trace:
    answer: int | None
    correct: bool
    length: int  # tokens, including the closing answer
    z: float  # latent confidence


@dataclass(frozen=True)
class _Tokens:
    ids: np.ndarray  # int [n] vocabulary ids of the chosen tokens
    chosen: np.ndarray  # int [n] grid index of each chosen logprob
    candidates: np.ndarray  # int [n, 20] vocabulary ids, best first
    top: np.ndarray  # int [n, 20] grid index of each candidate's logprob


class SimModel:
    """`complete(request, sample_key)` answers a chat-completions request the way DeepSeek does.

    `answers` maps problem text to gold answer; a prompt matches the problem it starts with.
    """

    def __init__(self, cfg: SimConfig, answers: Mapping[str, int] | None = None) -> None:
        self.cfg = cfg
        self._answers = {problem.strip(): int(answer) for problem, answer in (answers or {}).items()}
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def complete(self, request: Mapping[str, Any], sample_key: str | None = None) -> dict[str, Any]:
        return orjson.loads(self.complete_bytes(request, sample_key))

    def complete_bytes(self, request: Mapping[str, Any], sample_key: str | None = None, *,
                       degrade: Degrade = "none") -> bytes:
        """The response body as bytes. `sample_key` None takes the prompt's next counter value."""
        req = parse_request(request)
        problem_text = problem_of(req.prompt)
        greedy = req.temperature == 0.0
        seed = (self.cfg.seed, problem_text, self._key(problem_text, sample_key, greedy))
        trace = _draw_trace(self._problem(problem_text), self.cfg, _rng(*seed, "trace"))
        tokens = _draw_tokens(trace, req, seed, greedy)
        return _render(req, trace, tokens, seed, degrade)

    def gold_answer(self, prompt: str) -> int:
        """The answer the sim counts as right for a prompt (or for a bare problem text)."""
        return self._problem(problem_of(prompt)).gold

    def _key(self, problem_text: str, sample_key: str | None, greedy: bool) -> str:
        if greedy:
            return "greedy"  # DeepSeek at temperature 0 gives every sample of a prompt the same trace
        return sample_key if sample_key is not None else self._next_key(problem_text)

    def _next_key(self, problem_text: str) -> str:
        with self._lock:
            count = self._counters.get(problem_text, 0)
            self._counters[problem_text] = count + 1
        return f"#{count}"

    def _problem(self, problem_text: str) -> _Problem:
        return _draw_problem(self._gold(problem_text), self.cfg, _rng(self.cfg.seed, problem_text, "problem"))

    def _gold(self, problem_text: str) -> int:
        if problem_text in self._answers:
            return self._answers[problem_text]
        known = [problem for problem in self._answers if problem_text.startswith(problem)]
        if known:
            return self._answers[max(known, key=len)]  # "Find x. Then y." before "Find x."
        return int.from_bytes(_digest(problem_text, "gold")[:4], "little") % 1000


def problem_of(prompt: str) -> str:
    """The problem part of a prompt: "P\\n\\nPlease reason step by step, ..." -> "P"."""
    return prompt.split(PROMPT_SUFFIX, 1)[0].strip()


def parse_request(request: Mapping[str, Any]) -> SimRequest:
    """Check a chat-completions request the way DeepSeek does: 422 for wrong types, 400 for bad values."""
    prompt = _user_prompt(request.get("messages"))
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise SimRequestError("model: a model name is required", 400)
    temperature = _number(request, "temperature", 1.0)
    top_p = _number(request, "top_p", 1.0)  # checked, not modelled
    max_tokens = _integer(request, "max_tokens", 4096)
    top_logprobs = _integer(request, "top_logprobs", 0)
    logprobs = request.get("logprobs", False)
    if not isinstance(logprobs, bool):
        raise SimRequestError(f"logprobs: expected a boolean, got {logprobs!r}", 422)
    if not 0.0 <= temperature <= 2.0:
        raise SimRequestError(f"temperature: {temperature} is out of range [0, 2]")
    if not 0.0 < top_p <= 1.0:
        raise SimRequestError(f"top_p: {top_p} is out of range (0, 1]")
    if max_tokens < 1:
        raise SimRequestError(f"max_tokens: {max_tokens} must be >= 1")
    if not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
        raise SimRequestError(f"top_logprobs: {top_logprobs} must be between 0 and {MAX_TOP_LOGPROBS}")
    if top_logprobs and not logprobs:
        raise SimRequestError("top_logprobs requires logprobs to be true")
    return SimRequest(model, prompt, temperature, max_tokens, logprobs, top_logprobs)


def _user_prompt(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise SimRequestError("messages: a non-empty list of messages is required", 400)
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1], str):
        raise SimRequestError("messages: no user message with text content", 400)
    return users[-1]


def _number(request: Mapping[str, Any], key: str, default: float) -> float:
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SimRequestError(f"{key}: expected a number, got {value!r}", 422)
    return float(value)


def _integer(request: Mapping[str, Any], key: str, default: int) -> int:
    value = request.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SimRequestError(f"{key}: expected an integer, got {value!r}", 422)
    return value


# --- drawing -------------------------------------------------------------------------------------------


def _digest(*parts: object) -> bytes:
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=16).digest()


def _rng(*parts: object) -> np.random.Generator:
    words = np.frombuffer(_digest(*parts), dtype=np.uint32)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words.tolist())))


def _draw_problem(gold: int, cfg: SimConfig, rng: np.random.Generator) -> _Problem:
    a = cfg.accuracy
    p_correct = a if a in (0.0, 1.0) else float(rng.beta(_CONCENTRATION * a, _CONCENTRATION * (1 - a)))
    n = int(rng.integers(2, 5))
    others = rng.choice(999, size=n, replace=False)
    distractors = tuple(int(x + (x >= gold)) for x in others)  # skip the gold answer
    weights = tuple(float(w) for w in rng.dirichlet(np.full(n, 0.7)))
    return _Problem(gold, p_correct, distractors, weights)


def _draw_trace(problem: _Problem, cfg: SimConfig, rng: np.random.Generator) -> _Trace:
    answer: int | None
    if rng.random() < _NO_ANSWER:
        answer = None
    elif rng.random() < problem.p_correct:
        answer = problem.gold
    elif rng.random() < _SCATTERED:
        answer = int((problem.gold + 1 + rng.integers(999)) % 1000)
    else:
        answer = problem.distractors[int(rng.choice(len(problem.weights), p=problem.weights))]
    correct = answer == problem.gold
    mean = cfg.mean_tokens * (1.0 if correct else math.exp(0.2 * cfg.signal))
    raw = rng.lognormal(math.log(mean) - _LENGTH_SIGMA**2 / 2, _LENGTH_SIGMA)
    length = int(min(max(raw, len(_answer_tokens(0)) + 4), 8 * cfg.mean_tokens))
    z = float(rng.normal(0.0, _Z_SPREAD) + cfg.signal * (0.5 if correct else -0.5))
    return _Trace(answer, correct, length, z)


def _draw_tokens(trace: _Trace, req: SimRequest, seed: tuple, greedy: bool) -> _Tokens:
    """Token ids and logprob grid indices for the first min(length, max_tokens) tokens.

    Each quantity has its own stream, so a shorter max_tokens gives a prefix of the same trace.
    """
    n = min(trace.length, req.max_tokens)
    ids = _token_ids(trace, n, _rng(*seed, "ids"))
    fork_rate = _fork_rates(trace, n, _rng(*seed, "stretches"))
    logprobs = _candidate_logprobs(fork_rate, seed)
    rank = _chosen_rank(logprobs, req.temperature, _rng(*seed, "choice")) if not greedy else np.zeros(n, int)
    candidates = _candidates(ids, rank, _rng(*seed, "alternatives"))
    top = _grid_index(logprobs)
    chosen = top[np.arange(n), rank]
    if greedy:  # DeepSeek at temperature 0: 0.0 for the chosen token, sentinels for the rest
        chosen = np.zeros(n, int)
        top = np.ones_like(top)
        top[:, 0] = 0
    return _Tokens(ids, chosen, candidates, top)


def _token_ids(trace: _Trace, n: int, rng: np.random.Generator) -> np.ndarray:
    tables = _tables()
    ending = np.array([tables.index[t] for t in _answer_tokens(trace.answer)], dtype=np.int64)
    n_body = trace.length - len(ending)
    body = tables.body_ids[rng.choice(len(tables.body_ids), size=min(n, n_body), p=tables.body_p)]
    return np.concatenate([body, ending[: max(0, n - n_body)]])


def _answer_tokens(answer: int | None) -> list[str]:
    """How a trace ends; "}" comes last, so cutting even one token drops the box."""
    if answer is None:
        return ["\n\n", "I", " am", " not", " sure", " of", " the", " final", " value", "."]
    number = [str(answer)] if 0 <= answer <= 999 else list(str(answer))  # AIME answers are one token
    return ["\n\n", "Therefore", ",", " the", " answer", " is", " ", "\\", "boxed", "{", *number, "}"]


def _fork_rates(trace: _Trace, n: int, rng: np.random.Generator) -> np.ndarray:
    """Chance per token of a flat top-k distribution: higher in low-confidence stretches and low-z traces."""
    base = 0.08 * math.exp(-trace.z)
    n_stretches = rng.poisson(0.6e-3 * trace.length * math.exp(-1.5 * trace.z))
    starts = rng.integers(0, trace.length, size=n_stretches)
    ends = starts + rng.integers(*_STRETCH, size=n_stretches)
    marks = np.zeros(trace.length + 1, dtype=np.int64)
    np.add.at(marks, starts, 1)
    np.add.at(marks, np.minimum(ends, trace.length), -1)
    in_stretch = np.cumsum(marks)[:n] > 0
    return np.minimum(np.where(in_stretch, 5 * base, base), 0.9)


def _candidate_logprobs(fork_rate: np.ndarray, seed: tuple) -> np.ndarray:
    """float64 [n, 20] logprobs, best first: a large first gap at sure tokens, a small one at forks."""
    n = len(fork_rate)
    fork = _rng(*seed, "fork").random(n) < fork_rate
    sure_gap = 3.0 + _rng(*seed, "sure").gamma(2.0, 3.0, size=n)
    fork_gap = _rng(*seed, "flat").exponential(0.7, size=n)
    gaps = _rng(*seed, "gaps").exponential(0.6, size=(n, _CANDIDATES - 1))
    gaps[:, 0] += np.where(fork, fork_gap, sure_gap)
    logits = np.zeros((n, _CANDIDATES))
    np.cumsum(-gaps, axis=1, out=logits[:, 1:])
    # the vocabulary beyond the candidates holds some mass too: ~40 tokens just below the last one
    mass = np.exp(logits).sum(axis=1) + 40.0 * np.exp(logits[:, -1] - 0.5)
    return logits - np.log(mass)[:, None]


def _chosen_rank(logprobs: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    weights = np.exp((logprobs - logprobs[:, :1]) / temperature)
    cumulative = np.cumsum(weights, axis=1)
    u = rng.random(len(logprobs)) * cumulative[:, -1]
    return np.minimum((cumulative < u[:, None]).sum(axis=1), _CANDIDATES - 1)


def _candidates(ids: np.ndarray, rank: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Distinct candidate ids per token: a window of a shuffled pool, with the chosen token at its rank."""
    pool = _tables().alternatives
    starts = rng.integers(0, len(pool), size=len(ids))
    window = pool[(starts[:, None] + np.arange(_CANDIDATES + 1)) % len(pool)]
    # subtle: a window holds the chosen token at most once; the spare 21st entry takes its place
    candidates = np.where(window[:, :-1] == ids[:, None], window[:, -1:], window[:, :-1])
    candidates[np.arange(len(ids)), rank] = ids
    return candidates


def _grid_index(logprobs: np.ndarray) -> np.ndarray:
    """Index into the printed-logprob table: 0 is "0.0", 1 the sentinel, then the grid."""
    magnitude = np.maximum(-logprobs, 1e-300)
    step = np.clip(np.rint(np.log(magnitude) * _GRID), _GRID_MIN, _GRID_MAX).astype(np.int64)
    return np.where(magnitude < 1e-7, 0, 2 + step - _GRID_MIN)


# --- rendering -----------------------------------------------------------------------------------------


def _render(req: SimRequest, trace: _Trace, tokens: _Tokens, seed: tuple, degrade: Degrade) -> bytes:
    tables = _tables()
    n = len(tokens.ids)
    text = "".join(tables.text[tokens.ids].tolist())
    finish = "length" if n < trace.length else "stop"
    prompt_tokens = len(req.prompt.encode()) // 4 + 8
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n,
             "prompt_tokens_details": {"cached_tokens": 0}, "prompt_cache_hit_tokens": 0,
             "prompt_cache_miss_tokens": prompt_tokens}
    head = (b'{"id":"chatcmpl-sim-' + _digest(*seed, req.model).hex().encode() + b'","object":"chat.completion",'
            b'"created":' + str(CREATED).encode() + b',"model":' + orjson.dumps(req.model)
            + b',"choices":[{"index":0,"message":{"role":"assistant","content":' + orjson.dumps(text) + b"},")
    tail = (b'"finish_reason":"' + finish.encode() + b'"}],"usage":' + orjson.dumps(usage)
            + b',"system_fingerprint":"' + f"{FINGERPRINT_PREFIX}-s{seed[0]}".encode() + b'"}')
    return head + _logprobs_json(req, tokens, degrade) + tail


def _logprobs_json(req: SimRequest, tokens: _Tokens, degrade: Degrade) -> bytes:
    if degrade == "nologprobs":
        return b""
    if not req.logprobs:
        return b'"logprobs":null,'
    if degrade == "sentinel":
        tokens = _Tokens(tokens.ids, np.ones_like(tokens.chosen), tokens.candidates, np.ones_like(tokens.top))
    return b'"logprobs":{"content":[' + _items_json(tokens, req.top_logprobs) + b"]},"


def _items_json(tokens: _Tokens, k: int) -> bytes:
    """The logprobs.content items, joined from per-token fragments tabulated once per vocabulary."""
    t = _tables()
    n = len(tokens.ids)
    parts = np.empty((n, 3 + 3 * k), dtype=object)
    parts[:, 0] = t.entry_open[tokens.ids]
    parts[:, 1] = t.logprob_text[tokens.chosen]
    if k == 0:
        parts[:, 2] = t.item_close_empty[tokens.ids]
    else:
        candidates = tokens.candidates[:, :k]
        parts[:, 2] = t.item_open_top[tokens.ids]
        parts[:, 3::3] = t.entry_open[candidates]
        parts[:, 4::3] = t.logprob_text[tokens.top[:, :k]]
        parts[:, 5::3] = t.entry_close[candidates]
        parts[:, -1] = t.entry_close_last[candidates[:, -1]]
    parts[-1, -1] = parts[-1, -1][:-1]  # no comma after the last item
    return b"".join(parts.ravel().tolist())


# --- tables ---------------------------------------------------------------------------------------------

_WORDS = (
    " the", " of", " and", " to", " a", " is", " we", " that", " so", " in", " for", " this", " with", " be",
    " it", " are", " at", " by", " from", " as", " on", " not", " can", " each", " all", " must", " number",
    " Let", " Then", " Now", " Since", " Therefore", " Wait", " But", " So", " Hmm", " check", " again",
    " compute", " case", " sum", " value", " terms", " points", " side", " triangle", " circle", " angle",
    " integer", " divisible", " remainder", " mod", " equation", " solutions", " possible", " count",
    " x", " y", " n", " k", " m", " a", " b", " c", " p", " q", " r", " =", " +", " -", " \\cdot", " \\times",
    " <", " >", " \\le", " \\ge", " ≤", " ≥", " ×", " √", " π", " $", "$", "$$", " \\(", " \\)", "\\frac",
    "{", "}", "^", "_", "(", ")", "[", "]", ",", ".", ":", ";", "\n", "\n\n", " ", "  ", "1", "2", "3",
    "4", "5", "6", "7", "8", "9", "0", " 1", " 2", " 3", " 10", " 12", " 15", " 24", " 36", " 60", " 100",
    "**", "Step", " Step", "\"", " \"", "'", " quote\"d", "\\\\", "\t", "é", " 中", "—",
)


@dataclass(frozen=True, eq=False)
class _Tables:
    text: np.ndarray  # object [V] token strings
    index: dict[str, int]
    body_ids: np.ndarray  # ids the trace body is drawn from
    body_p: np.ndarray  # their Zipf weights
    entry_open: np.ndarray  # object [V] b'{"token":"x","logprob":'
    entry_close: np.ndarray  # b',"bytes":[120]},'
    entry_close_last: np.ndarray  # b',"bytes":[120]}]},'  (closes top_logprobs and the item)
    item_open_top: np.ndarray  # b',"bytes":[120],"top_logprobs":['
    item_close_empty: np.ndarray  # b',"bytes":[120],"top_logprobs":[]},'
    logprob_text: np.ndarray  # object [2 + grid] b"0.0", b"-9999.0", then the grid
    alternatives: np.ndarray  # shuffled ids of the words and the numbers 0-99 that runners-up are drawn from


@functools.cache
def _tables() -> _Tables:
    ending = _answer_tokens(None) + _answer_tokens(0)
    vocab = list(dict.fromkeys([*_WORDS, *ending, "-", *(str(i) for i in range(1000))]))
    body = list(dict.fromkeys(_WORDS))
    body_p = 1.0 / (np.arange(len(body)) + 3.0)
    as_json = [orjson.dumps(t) for t in vocab]
    as_bytes = [orjson.dumps(list(t.encode())) for t in vocab]
    grid = [b"0.0", b"-9999.0"] + [
        b"%.7g" % -math.exp(step / _GRID) for step in range(_GRID_MIN, _GRID_MAX + 1)]
    return _Tables(
        text=_objects(vocab),
        index={t: i for i, t in enumerate(vocab)},
        body_ids=np.array([vocab.index(t) for t in body], dtype=np.int64),
        body_p=body_p / body_p.sum(),
        entry_open=_objects([b'{"token":' + j + b',"logprob":' for j in as_json]),
        entry_close=_objects([b',"bytes":' + b + b"}," for b in as_bytes]),
        entry_close_last=_objects([b',"bytes":' + b + b"}]}," for b in as_bytes]),
        item_open_top=_objects([b',"bytes":' + b + b',"top_logprobs":[' for b in as_bytes]),
        item_close_empty=_objects([b',"bytes":' + b + b',"top_logprobs":[]},' for b in as_bytes]),
        logprob_text=_objects(grid),
        alternatives=np.random.default_rng(0).permutation(
            [vocab.index(t) for t in dict.fromkeys([*body, *(str(i) for i in range(100))])]),
    )


def _objects(items: Sequence[object]) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array
