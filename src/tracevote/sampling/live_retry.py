"""One live trace streamed, and asked again from its start when its stream breaks after its first tokens.

The retry is the client's own (ChatClient through core.retry), as for every other paid call: pool.max_retries
retries at most, its backoff, the run's breaker, another endpoint where there is one. A stream that breaks (cut,
ended without its last chunk, a malformed event, only -9999 sentinel logprobs, a stall past the read timeout)
goes back to it as a failed attempt through stream_completion's `restart` hook, which books the attempt here and
gives the stop rule a fresh start. The request carries the same sample key, hence the same seed, so the next
attempt is the same trace from its first token, and it stops where an unbroken stream (and the replay) stops.

A broken attempt's tokens were billed as they arrived (a broken stream carries no usage): Attempts counts them, and
the stored trace carries them (LiveTrace.failed_attempts, failed_tokens, and their price in its usd). A trace still
broken when its retries run out ends the run (gave_up: one line naming it). A trace cancelled by the consensus stop
is not asked again: nothing would vote with it.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from tracevote.core.config_endpoints import PricingConfig
from tracevote.core.costs import prompt_bytes, prompt_tokens, usd
from tracevote.core.errors import TracevoteError
from tracevote.core.retry import TransientError
from tracevote.deepconf.live import WindowStop
from tracevote.sampling.client import ChatClient, StreamBroken
from tracevote.sampling.stream import Streamed, TokenBatch, stream_completion
from tracevote.store.live import StopReason

Messages = list[dict[str, str]]


@dataclass
class Attempts:
    """The attempts at one trace whose stream broke after tokens arrived: how many, the tokens received on them (billed
    as received, counted by the client), their price, and why each broke."""

    failed: int = 0
    tokens: int = 0
    usd: float = 0.0
    causes: collections.Counter[str] = field(default_factory=collections.Counter)

    def broke(self, broken: StreamBroken, paid_usd: float) -> None:
        received = broken.received
        self.failed += 1
        self.tokens += received.n_tokens if isinstance(received, Streamed) else 0
        self.usd += paid_usd
        self.causes[broken.cause] += 1


class GaveUp(TracevoteError):
    """A trace still broken after its retries: the run stopped starting streams."""


def gave_up(trace: str, attempts: Attempts, last: TransientError | StreamBroken, max_retries: int) -> GaveUp:
    """"trace q3/2 (warmup) still failed after pool.max_retries (2): stream cut x3 (...); 41 tokens received ..."."""
    broke = ", ".join(f"{cause} x{count}" for cause, count in attempts.causes.most_common())
    streams = (f"; its stream broke {attempts.failed} times ({broke}), and the {attempts.tokens} tokens received on "
               f"those attempts were billed" if attempts.failed else "")
    detail = f" ({last.detail})" if last.detail else ""
    return GaveUp(f"trace {trace} still failed after pool.max_retries ({max_retries}) retries: {last.cause}{detail}"
                  f"{streams}. The run stopped starting streams (every trace that ended is stored); run the stage "
                  f"again once the endpoint is sound: it streams only the missing traces")


def price(streamed: Streamed, messages: Messages, pricing: PricingConfig) -> float:
    """What an attempt cost: the server's usage, else its prompt estimated as the spend guard does and the tokens
    received."""
    prompt = streamed.prompt_tokens
    if prompt is None:
        prompt = prompt_tokens(prompt_bytes(messages))
    return usd(prompt, streamed.completion_tokens, pricing)


class _Observer:
    """The stop rule on the attempt streaming now; a fresh rule for each attempt."""

    def __init__(self, new_rule: Callable[[], WindowStop | None], cancel: threading.Event, max_tokens: int,
                 signal: Callable[[TokenBatch], np.ndarray]) -> None:
        self.new_rule = new_rule
        self.signal = signal
        self.cancel = cancel
        self.max_tokens = max_tokens
        self.rule = new_rule()
        self.why: StopReason | None = None

    def fresh(self) -> None:
        self.rule, self.why = self.new_rule(), None

    def __call__(self, batch: TokenBatch) -> Literal["stop"] | int | None:
        if self.rule is not None and self.rule.feed(self.signal(batch)) is not None:
            self.why = "confidence"
            return "stop"
        if self.cancel.is_set():
            self.why = "consensus-cancelled"
            return "stop"
        return self.safe()

    def safe(self) -> int:
        """The tokens the client may hold back: as many as the rule can take before it could stop (a warmup trace
        never stops on its tokens; a cancel reaches the client at once, whatever it holds)."""
        return self.max_tokens if self.rule is None else self.rule.safe_tokens()


def stream_trace(client: ChatClient, messages: Messages, sample_key: str, new_rule: Callable[[], WindowStop | None],
                 *, max_tokens: int, cancel: threading.Event, batch_chunks: int, attempts: Attempts,
                 pricing: PricingConfig, signal: Callable[[TokenBatch], np.ndarray],
                 keep_top_logprobs: bool = False) -> tuple[Streamed, StopReason, int]:
    """The trace streamed (asked again from its start each time its stream breaks, within the client's retries),
    how it ended and how many of its tokens are kept; closed when its rule (`new_rule()`, None for a warmup trace)
    fires or the run cancels it, the rule reading `signal` of each batch (the run's confidence.token). Broken
    attempts are booked on `attempts`, also when the retries run out."""
    observer = _Observer(new_rule, cancel, max_tokens, signal)

    def restart(broken: StreamBroken) -> None:
        received = broken.received
        attempts.broke(broken, price(received, messages, pricing) if isinstance(received, Streamed) else 0.0)
        if cancel.is_set():
            raise broken  # cancelled by the consensus stop: nothing would vote with it
        observer.fresh()

    streamed = stream_completion(client, messages, sample_key=sample_key, observer=observer, max_tokens=max_tokens,
                                 keep_top_logprobs=keep_top_logprobs, batch_chunks=batch_chunks, want=observer.safe(),
                                 cancel=cancel, restart=restart)
    reason: StopReason = observer.why or streamed.stop_reason  # type: ignore[assignment]
    rule = observer.rule
    if reason == "confidence" and rule is not None and rule.spent is not None:
        return streamed, reason, rule.spent
    return streamed, reason, streamed.n_tokens
