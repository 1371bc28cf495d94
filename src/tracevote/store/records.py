"""Typed records passed between stages: a sampled trace, and one problem's traces in columnar form."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracevote.answers.extract import AnswerCandidates

NO_ANSWER = -1  # answers are integers 0-999, so -1 marks "no answer" inside int arrays


@dataclass(frozen=True, eq=False)
class Sample:
    """One sampled trace, as the client returns it and the pool stores it.

    Absent logprobs (sentinels, non-finite values, or none reported) are NaN, never numbers.
    `top_logprobs` rows are best first; it is None when the pool keeps only `token_confidence`.
    `token_confidence` is C_i, computed in float64 from the logprobs as received (ingestion) and always
    stored; None only for a Sample built without it, whose C_i codec.encode computes from what it holds.
    `text` is the reply's content; `reasoning` is the thinking a server with a reasoning parser sends apart
    (message.reasoning_content or .reasoning), "" when it sends none. The tokens and their logprobs are every
    generated token in order, reasoning then content, as the server's logprobs.content lists them.
    """

    problem_id: str
    sample_id: int
    text: str
    tokens: list[str]
    token_logprobs: np.ndarray  # float32 [n]
    top_logprobs: np.ndarray | None  # float32 [n, k]
    top_tokens: list[list[str]] | None  # [n][k] strings matching top_logprobs, when kept
    token_confidence: np.ndarray | None  # float32 [n]: C_i
    answer: int | None
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    reasoning: str = ""

    @property
    def n_tokens(self) -> int:
        return len(self.token_logprobs)


@dataclass(frozen=True, eq=False)
class ProblemTraces:
    """All traces of one problem, flattened: trace j owns tokens offsets[j]:offsets[j+1].

    `token_confidence` is C_i (see tracevote.deepconf.confidence.token_confidence), NaN where a token has none.
    `candidates` are each trace's answer candidates (tracevote.answers.extract), before the `answers:` params.
    """

    problem_id: str
    sample_ids: np.ndarray  # int64 [n]
    candidates: list[AnswerCandidates]
    finish_reasons: list[str]
    offsets: np.ndarray  # int64 [n + 1]
    token_confidence: np.ndarray  # float32 as a pool stores it, or float64 [total tokens]

    def __len__(self) -> int:
        return len(self.sample_ids)
