"""The simulated model's tokens: a trace's outline in, token ids and top-k logprobs out (see model.py).

Logprobs are drawn as float64 and kept as indices into a table of printed values on a grid 0.4% apart,
so rendering never formats a float: index 0 is "0.0", 1 the -9999 sentinel, then the grid.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from tracevote.sim.request import SimRequest

_CANDIDATES = 20  # candidates drawn per token; the request's top_logprobs shows the first k
_STRETCH = (48, 320)  # low-confidence stretch lengths, tokens
_GRID = 256  # logprob grid steps per e-fold
_GRID_MIN = round(math.log(1e-7) * _GRID)  # magnitudes below 1e-7 print as 0.0
_GRID_MAX = round(math.log(100.0) * _GRID)


@dataclass(frozen=True)
class Trace:
    answer: int | str | None  # str: a LaTeX answer (sim/golds.py), boxed character by character
    correct: bool
    length: int  # tokens, including the closing answer
    z: float  # latent confidence


@dataclass(frozen=True)
class Tokens:
    ids: np.ndarray  # int [n] vocabulary ids of the chosen tokens
    chosen: np.ndarray  # int [n] grid index of each chosen logprob
    candidates: np.ndarray  # int [n, 20] vocabulary ids, best first
    top: np.ndarray  # int [n, 20] grid index of each candidate's logprob


def digest(*parts: object) -> bytes:
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=16).digest()


def seeded_rng(*parts: object) -> np.random.Generator:
    words = np.frombuffer(digest(*parts), dtype=np.uint32)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words.tolist())))


def draw_tokens(trace: Trace, req: SimRequest, seed: tuple, greedy: bool) -> Tokens:
    """Token ids and logprob grid indices for the first min(length, max_tokens) tokens.

    Each quantity has its own stream, so a shorter max_tokens gives a prefix of the same trace.
    """
    n = min(trace.length, req.max_tokens)
    ids = _token_ids(trace, n, seeded_rng(*seed, "ids"))
    fork_rate = _fork_rates(trace, n, seeded_rng(*seed, "stretches"))
    logprobs = _candidate_logprobs(fork_rate, seed)
    rank = _chosen_rank(logprobs, req.temperature, seeded_rng(*seed, "choice")) if not greedy else np.zeros(n, int)
    candidates = _candidates(ids, rank, seeded_rng(*seed, "alternatives"))
    top = _grid_index(logprobs)
    chosen = top[np.arange(n), rank]
    if greedy:  # DeepSeek at temperature 0: 0.0 for the chosen token, sentinels for the rest
        chosen = np.zeros(n, int)
        top = np.ones_like(top)
        top[:, 0] = 0
    return Tokens(ids, chosen, candidates, top)


def _token_ids(trace: Trace, n: int, rng: np.random.Generator) -> np.ndarray:
    t = tables()
    ending = np.array([t.index[token] for token in answer_tokens(trace.answer)], dtype=np.int64)
    n_body = trace.length - len(ending)
    body = t.body_ids[rng.choice(len(t.body_ids), size=min(n, n_body), p=t.body_p)]
    return np.concatenate([body, ending[: max(0, n - n_body)]])


def answer_tokens(answer: int | str | None) -> list[str]:
    """How a trace ends; "}" comes last, so cutting even one token drops the box."""
    if answer is None:
        return ["\n\n", "I", " am", " not", " sure", " of", " the", " final", " value", "."]
    # AIME answers are one token; a LaTeX answer (printable ASCII, sim/golds.py) one token per character
    content = list(answer) if isinstance(answer, str) else [str(answer)] if 0 <= answer <= 999 else list(str(answer))
    return ["\n\n", "Therefore", ",", " the", " answer", " is", " ", "\\", "boxed", "{", *content, "}"]


def _fork_rates(trace: Trace, n: int, rng: np.random.Generator) -> np.ndarray:
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
    fork = seeded_rng(*seed, "fork").random(n) < fork_rate
    sure_gap = 3.0 + seeded_rng(*seed, "sure").gamma(2.0, 3.0, size=n)
    fork_gap = seeded_rng(*seed, "flat").exponential(0.7, size=n)
    gaps = seeded_rng(*seed, "gaps").exponential(0.6, size=(n, _CANDIDATES - 1))
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
    pool = tables().alternatives
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
class Tables:
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
def tables() -> Tables:
    ending = answer_tokens(None) + answer_tokens(0)
    # subtle: the printable ASCII characters (LaTeX answers) come last, so every earlier token keeps its id
    vocab = list(dict.fromkeys([*_WORDS, *ending, "-", *(str(i) for i in range(1000)), *map(chr, range(32, 127))]))
    body = list(dict.fromkeys(_WORDS))
    body_p = 1.0 / (np.arange(len(body)) + 3.0)
    as_json = [orjson.dumps(t) for t in vocab]
    as_bytes = [orjson.dumps(list(t.encode())) for t in vocab]
    grid = [b"0.0", b"-9999.0"] + [
        b"%.7g" % -math.exp(step / _GRID) for step in range(_GRID_MIN, _GRID_MAX + 1)]
    return Tables(
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
