"""What the simulator's server counted, as `GET /_stats` returns it: requests per sample, per kind and per
outcome, replies delivered whole, tokens streamed per sample, how streams ended, and connections accepted."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from tracevote.core.simulated import SOLVE


@dataclass
class ServerStats:
    """Requests per sample and per kind of call (as marked, unknown kinds too); outcomes ("ok", a fault
    kind, or a status such as "401") as decided; and per sample the complete valid responses ("ok" or
    "slow") written out in full."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    by_sample: collections.Counter[str] = field(default_factory=collections.Counter)
    by_kind: collections.Counter[str] = field(default_factory=collections.Counter)
    delivered: collections.Counter[str] = field(default_factory=collections.Counter)
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    generated: collections.Counter[str] = field(default_factory=collections.Counter)
    streams: collections.Counter[str] = field(default_factory=collections.Counter)
    choices: collections.Counter[str] = field(default_factory=collections.Counter)  # whole replies' choices, by key
    connections: int = 0  # TCP connections accepted: a client that keeps its connections alive opens few
    anonymous: int = 0

    def begin(self, sample_key: str | None, kind: str = SOLVE) -> tuple[str, int]:
        """(the key counted, how many requests for it came before this one)."""
        with self.lock:
            self.by_kind[kind] += 1
            if sample_key is None:
                self.anonymous += 1
                sample_key = f"#request{self.anonymous}"
            attempt = self.by_sample[sample_key]
            self.by_sample[sample_key] += 1
            return sample_key, attempt

    def outcome(self, outcome: str) -> None:
        with self.lock:
            self.outcomes[outcome] += 1

    def delivered_to(self, sample_key: str, count: int = 1) -> None:
        with self.lock:
            self.delivered[sample_key] += count

    def streamed(self, sample_key: str, tokens: int) -> None:
        with self.lock:
            self.generated[sample_key] += tokens

    def answered(self, choice_keys: list[str | None]) -> None:
        """A whole reply was made, one choice for each of `choice_keys` (n of them where n is honoured)."""
        with self.lock:
            self.choices.update(key for key in choice_keys if key is not None)

    def stream_ended(self, ending: str) -> None:
        with self.lock:
            self.streams[ending] += 1

    def connected(self) -> None:
        with self.lock:
            self.connections += 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": sum(self.by_sample.values()), "outcomes": dict(self.outcomes),
                    "by_sample": dict(self.by_sample), "by_kind": dict(self.by_kind),
                    "delivered": dict(self.delivered), "generated_tokens": dict(self.generated),
                    "streams": dict(self.streams), "choices": dict(self.choices), "connections": self.connections}
