"""The simulated model: DeepSeek-format chat completions with boxed answers and top-k logprobs, in-process.

How one response is drawn; every draw is seeded by (cfg.seed, the request's model name, problem, sample_key), so
the order and the threads of requests never change a response, and two model names on one server answer as two
models (the problem's own draws, step 1, are the same for every name: they are the data, not the model):

1. The problem. Its gold answer comes from `answers` (or `answer_sets`), else from a hash of the problem
   text. It draws a chance p ~ Beta(3a, 3(1-a)) that one trace is right (a = cfg.accuracy) and 2-4
   distractor answers with uneven Dirichlet weights, so on hard problems the most common answer is wrong.
   Wrong answers follow the gold answers' distribution: drawn from the integer gold answers of the other
   problems of its answer set (one dataset: the empirical distribution; AIME's has median ~220), or
   uniformly from 0-999 (how hash-drawn golds are spread) when the set holds fewer than 8. So a tie
   between the gold and a wrong answer is won by the smaller one half the time, and the smallest-wins tie
   rule earns no more than a uniform random tie-break would (it used to: uniform distractors against
   AIME's small golds). A LaTeX gold (MATH-500's "\\frac{14}{3}") is answered as text: its distractors
   are near misses of it, its scattered wrong answers also the set's other LaTeX golds (golds.py).
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

This is the "solve" kind of call; kinds.py routes each request to its kind's responder by the marker the
client sends (X-Tracevote-Kind), never by the prompt's text. This module draws the problem and the trace's
outline (answer, length, z); tokens.py draws its tokens and logprobs, render.py writes the JSON, and
request.py checks the request.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson

from tracevote.core.config_endpoints import SimConfig
from tracevote.core.profiles import PROFILES, Profile
from tracevote.core.simulated import SOLVE
from tracevote.sim.golds import Gold, near_misses, sim_gold, text_wrong_pool
from tracevote.sim.kinds import responder_for
from tracevote.sim.render import Degrade, render
from tracevote.sim.request import ReasoningField, SimRequest, parse_request, problem_of
from tracevote.sim.stream import LAYOUTS, StreamEvent, stream_request, stream_trace, stream_whole
from tracevote.sim.tokens import Tokens, Trace, answer_tokens, digest, draw_tokens, seeded_rng

_LENGTH_SIGMA = 0.45
_CONCENTRATION = 3.0  # of the per-problem Beta: lower spreads difficulties further
_NO_ANSWER = 0.01
_Z_SPREAD = 0.8  # of the latent confidence; long traces reach AUROC Phi(signal / (0.8 * sqrt 2))
_SCATTERED = 0.15
_MIN_EMPIRICAL = 8  # fewer known gold answers than this: wrong answers are uniform on 0-999
_PROBLEMS_KEPT = 4096  # problems whose draws a model keeps (a study's datasets hold a few hundred)


@dataclass(frozen=True)
class _Problem:
    gold: Gold
    p_correct: float
    distractors: tuple[Gold, ...]
    weights: tuple[float, ...]
    wrong_answers: np.ndarray  # int64 (object for a text gold): where scattered wrong answers come from (with repeats)


class SimModel:
    """`complete(request, sample_key)` answers a chat-completions request the way DeepSeek does.

    `answers` maps problem text to gold answer (an integer, or LaTeX text: golds.sim_gold); a prompt matches the
    problem it starts with. `answer_sets` are more such maps, one per dataset: a problem's wrong answers are drawn
    from the golds of its own set (GSM8K's large numbers never become AIME's distractors).
    `first_errors` maps a solution's steps digest (tracevote.critique.prompts.steps_digest) to its first
    wrong step, for critique calls. `reached` maps a reasoning's digest
    (tracevote.critique.critic_prompt.reasoning_digest) to whether it reached its gold answer, for grading critic
    calls.
    """

    def __init__(self, cfg: SimConfig, answers: Mapping[str, int | str] | None = None,
                 first_errors: Mapping[str, int] | None = None, reached: Mapping[str, bool] | None = None, *,
                 answer_sets: Sequence[Mapping[str, int | str]] = ()) -> None:
        self.cfg = cfg
        self._first_errors = dict(first_errors or {})
        self._reached = dict(reached or {})
        self._answers: dict[str, Gold] = {}
        self._set_of: dict[str, int] = {}
        for index, golds in enumerate([answers or {}, *answer_sets]):
            for problem, answer in golds.items():
                self._answers[problem.strip()] = _learnt(problem, answer)
                self._set_of[problem.strip()] = index
        sets = range(len(answer_sets) + 1)
        # sorted, so the draws do not depend on the order of `answers`; the last pool (all sets) serves unknown problems
        self._int_pools = [_sorted_ints(self._golds_of(index, int)) for index in sets]
        self._int_pools.append(_sorted_ints([g for g in self._answers.values() if isinstance(g, int)]))
        self._text_pools = [sorted(self._golds_of(index, str)) for index in sets]
        self._counters: dict[str, int] = {}
        self._lock = threading.Lock()
        # a problem's draws depend on its text and what __init__ fixed alone: drawn once, not on every request
        self._problem = functools.lru_cache(maxsize=_PROBLEMS_KEPT)(self._draw_problem_of)

    def complete(self, request: Mapping[str, Any], sample_key: str | None = None) -> dict[str, Any]:
        return orjson.loads(self.complete_bytes(request, sample_key))

    def complete_bytes(self, request: Mapping[str, Any], sample_key: str | None = None, *,
                       degrade: Degrade = "none", kind: str = SOLVE, profile: Profile = PROFILES["deepseek"],
                       reasoning_parser: ReasoningField | None = None) -> bytes:
        """The response body as bytes, from the responder of `kind` (sim/kinds.py). Raises SimRequestError
        for a request `profile`'s provider refuses and UnknownKindError for a kind nothing answers. With a
        `reasoning_parser`, a solve reply's thinking goes in that message field (sim/split.py)."""
        responder = responder_for(kind)
        req = replace(parse_request(request, profile), reasoning_parser=reasoning_parser)
        return responder(req, sample_key, self, degrade=degrade)

    def solve(self, req: SimRequest, sample_key: str | None, *, degrade: Degrade = "none") -> bytes:
        """A "solve" call: one reasoning trace boxing an answer, drawn as the module docstring says.
        `sample_key` None takes the prompt's next counter value."""
        return render(req, *self._draw(req, sample_key), degrade)

    def stream(self, request: Mapping[str, Any], sample_key: str | None = None, *, degrade: Degrade = "none",
               kind: str = SOLVE, profile: Profile = PROFILES["deepseek"],
               reasoning_parser: ReasoningField | None = None) -> Iterator[StreamEvent]:
        """The reply to a `stream: true` request as server-sent events, rendered one per next() (sim/stream.py).
        Refuses (SimRequestError, UnknownKindError) before the first event exactly what complete_bytes refuses.
        A solve call streams the tokens complete_bytes returns for the same request and key, one per chunk."""
        options = stream_request(request)
        req = replace(parse_request(request, profile), reasoning_parser=reasoning_parser)
        layout = LAYOUTS[profile.name]
        if kind != SOLVE:
            body = responder_for(kind)(req, sample_key, self, degrade=degrade)
            return stream_whole(req, body, (self.cfg.seed, kind, sample_key), options, layout)
        trace, tokens, seed = self._draw(req, sample_key)
        return stream_trace(req, trace, tokens, seed, options, layout, degrade)

    def _draw(self, req: SimRequest, sample_key: str | None) -> tuple[Trace, Tokens, tuple]:
        """A solve call's trace, its tokens and its seed: from (cfg.seed, model name, problem, key) alone."""
        problem_text = problem_of(req.prompt)
        greedy = req.temperature == 0.0
        seed = (*self.name_seed(req.model), problem_text, self._key(problem_text, sample_key, greedy))
        trace = _draw_trace(self._problem(problem_text), self.cfg, seeded_rng(*seed, "trace"))
        return trace, draw_tokens(trace, req, seed, greedy), seed

    def name_seed(self, model_name: str) -> tuple[int, str]:
        """What every draw of a model's replies starts from: cfg.seed and the model's name, so two names on one
        server answer as two models (reproducibly), while the problems and solutions stay the same data."""
        return self.cfg.seed, model_name

    def draw_outline(self, problem_text: str, key: str, model_name: str) -> Trace:
        """A trace's outline (answer, length) for a text-only call, drawn as a solve trace is (no tokens)."""
        return self.draw_outlines(problem_text, [key], model_name)[0]

    def draw_outlines(self, problem_text: str, keys: Sequence[str], model_name: str) -> list[Trace]:
        """`draw_outline` of each key, the problem drawn once (a pool's worth of outlines at a time)."""
        problem = self._problem(problem_text)
        seed = self.name_seed(model_name)
        return [_draw_trace(problem, self.cfg, seeded_rng(*seed, problem_text, key, "outline")) for key in keys]

    def problem_within(self, prompt: str) -> str:
        """The longest known problem that a prompt holds anywhere (a debate quotes it mid-message), else the
        prompt's leading problem part."""
        held = [problem for problem in self._answers if problem in prompt]
        return max(held, key=len) if held else problem_of(prompt)

    def first_error(self, solution_digest: str) -> int | None:
        """The known first wrong step of a solution (-1: none), or None for a solution not known."""
        return self._first_errors.get(solution_digest)

    def reached_gold(self, reasoning_digest: str) -> bool | None:
        """Whether a known reasoning reached its gold answer, or None for a reasoning not known."""
        return self._reached.get(reasoning_digest)

    def gold_answer(self, prompt: str) -> Gold:
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

    def _golds_of(self, index: int, kind: type) -> list[Gold]:
        return [gold for problem, gold in self._answers.items() if self._set_of[problem] == index and
                isinstance(gold, kind)]

    def _draw_problem_of(self, problem_text: str) -> _Problem:
        known = self._known_as(problem_text)
        rng = seeded_rng(self.cfg.seed, problem_text, "problem")
        if known is None:
            gold = int.from_bytes(digest(problem_text, "gold")[:4], "little") % 1000
            return _draw_problem(gold, wrong_answer_pool(gold, self._int_pools[-1]), self.cfg, rng)
        gold, index = self._answers[known], self._set_of[known]
        if isinstance(gold, str):
            return _draw_problem(gold, text_wrong_pool(gold, self._text_pools[index]), self.cfg, rng,
                                 near=near_misses(gold))
        return _draw_problem(gold, wrong_answer_pool(gold, self._int_pools[index]), self.cfg, rng)

    def _known_as(self, problem_text: str) -> str | None:
        """The known problem a problem text is, or starts with ("Find x. Then y." before "Find x."), or None."""
        if problem_text in self._answers:
            return problem_text
        known = [problem for problem in self._answers if problem_text.startswith(problem)]
        return max(known, key=len) if known else None


def _learnt(problem: str, answer: int | str) -> Gold:
    gold, why_not = sim_gold(answer)
    if gold is None:
        raise ValueError(f"the simulator cannot answer with the gold of {problem[:60]!r}: {why_not}")
    return gold


def _sorted_ints(golds: Sequence[Gold]) -> np.ndarray:
    return np.sort(np.fromiter(golds, dtype=np.int64, count=len(golds)))


def wrong_answer_pool(gold: int, gold_pool: np.ndarray) -> np.ndarray:
    """The answers a wrong trace may give, with repeats: the known gold answers other than `gold`, or
    0-999 without `gold` when too few are known.

    >>> wrong_answer_pool(5, np.array([5, 7, 7])).size, wrong_answer_pool(5, np.arange(20))[:6].tolist()
    (999, [0, 1, 2, 3, 4, 6])
    """
    others = gold_pool[gold_pool != gold]
    if len(others) < _MIN_EMPIRICAL:
        others = np.arange(1000, dtype=np.int64)
        others = others[others != gold]
    return others


def _draw_problem(gold: Gold, wrong_answers: np.ndarray, cfg: SimConfig, rng: np.random.Generator, *,
                  near: tuple[str, ...] | None = None) -> _Problem:
    """A problem's chance of a right trace and its distractors: from `wrong_answers`, or for a text gold from its
    `near` misses (golds.near_misses, four or more)."""
    a = cfg.accuracy
    p_correct = a if a in (0.0, 1.0) else float(rng.beta(_CONCENTRATION * a, _CONCENTRATION * (1 - a)))
    n = int(rng.integers(2, 5))
    if near is None:
        distractors: tuple[Gold, ...] = tuple(int(x) for x in rng.choice(wrong_answers, size=n, replace=False))
    else:
        distractors = tuple(near[i] for i in rng.choice(len(near), size=n, replace=False))
    weights = tuple(float(w) for w in rng.dirichlet(np.full(n, 0.7)))
    return _Problem(gold, p_correct, distractors, weights, wrong_answers)


def _draw_trace(problem: _Problem, cfg: SimConfig, rng: np.random.Generator) -> Trace:
    answer: Gold | None
    if rng.random() < _NO_ANSWER:
        answer = None
    elif rng.random() < problem.p_correct:
        answer = problem.gold
    elif rng.random() < _SCATTERED:
        scattered = problem.wrong_answers[rng.integers(len(problem.wrong_answers))]
        answer = scattered if isinstance(scattered, str) else int(scattered)
    else:
        answer = problem.distractors[int(rng.choice(len(problem.weights), p=problem.weights))]
    correct = answer == problem.gold
    mean = cfg.mean_tokens * (1.0 if correct else math.exp(0.2 * cfg.signal))
    raw = rng.lognormal(math.log(mean) - _LENGTH_SIGMA**2 / 2, _LENGTH_SIGMA)
    # subtle: a long LaTeX answer needs more tokens than an integer's box; the integers' bound is kept as it was
    shortest = max(len(answer_tokens(0)), len(answer_tokens(answer))) + 4
    length = int(min(max(raw, shortest), max(8 * cfg.mean_tokens, shortest)))
    z = float(rng.normal(0.0, _Z_SPREAD) + cfg.signal * (0.5 if correct else -0.5))
    return Trace(answer, correct, length, z)

