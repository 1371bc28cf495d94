"""Faults the sim server injects: which one, if any, each attempt at a sample gets.

Faults are drawn per (seed, sample, attempt), so a run is reproducible whatever the concurrency, and a
sample gets at most `max_per_sample` faults, so none fails forever. Fault spec (see parse_faults):
    429=0.05,500=0.05,503=0.05,slow=0.05,drop=0.05,malformed=0.05,truncated=0.05,nologprobs=0.05,sentinel=0.05,cut=0.05
    all=0.2                        20% spread evenly over the ten kinds
    seed=1,retry_after_s=0.05,slow_s=0.05,max_per_sample=3,stream_after=8   options
    overloaded_retry_after=1       503s carry Retry-After too (retry_after_s), as an overloaded gateway's may

A streamed reply (`stream: true`) meets drop, slow, malformed, truncated and cut mid-stream, after `stream_after`
content chunks: the connection dropped without ending the body, no bytes for slow_s, half an event, the body
ended without a finish chunk or [DONE], the connection dropped inside an HTTP chunk (half of it sent). The other
kinds strike as they do a whole reply (cut as truncated: half the body, then the connection closes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tracevote.core.errors import ConfigError

FAULT_KINDS = ("429", "500", "503", "slow", "drop", "malformed", "truncated", "nologprobs", "sentinel", "cut")
_OPTIONS = {"seed": int, "retry_after_s": float, "slow_s": float, "max_per_sample": int, "stream_after": int,
            "overloaded_retry_after": int}


@dataclass(frozen=True)
class FaultPlan:
    """Chance of each fault kind per request; at most one fault per request."""

    rates: tuple[tuple[str, float], ...] = ()
    seed: int = 0
    retry_after_s: float = 0.5
    slow_s: float = 0.5
    max_per_sample: int = 3
    stream_after: int = 8  # a streamed reply's fault strikes after this many content chunks
    overloaded_retry_after: int = 0  # 1: a 503 carries Retry-After: retry_after_s; 0: none (the client backs off)

    def choose(self, sample_key: str, attempt: int) -> str | None:
        """The fault for this attempt at this sample, or None; attempts past max_per_sample get none."""
        if attempt >= self.max_per_sample or not self.rates:
            return None
        digest = hashlib.blake2b(f"{self.seed}\x1f{sample_key}\x1f{attempt}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "little") / 2**64
        total = 0.0
        for kind, rate in self.rates:
            total += rate
            if u < total:
                return kind
        return None


def parse_faults(spec: str) -> FaultPlan:
    """"429=0.1,drop=0.05,slow_s=0.1" -> FaultPlan; "all=0.2" spreads 0.2 evenly, named kinds override it."""
    rates: dict[str, float] = {}
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, value = item.partition("=")
        name = name.strip()
        if name in _OPTIONS:
            options[name] = _option(spec, name, value)
        elif name == "all":
            share = _rate(spec, name, value) / len(FAULT_KINDS)
            rates.update({kind: share for kind in FAULT_KINDS if kind not in rates})
        elif name in FAULT_KINDS:
            rates[name] = _rate(spec, name, value)
        else:
            raise ConfigError(f"--faults {spec!r}: unknown fault {name!r} (known: all, {', '.join(FAULT_KINDS)}; "
                              f"options: {', '.join(_OPTIONS)})")
    if sum(rates.values()) > 1.0 + 1e-9:
        raise ConfigError(f"--faults {spec!r}: the chances add up to {sum(rates.values()):.3g}, more than 1")
    ordered = tuple((kind, rates[kind]) for kind in FAULT_KINDS if rates.get(kind, 0.0) > 0)
    return FaultPlan(rates=ordered, **options)


def _rate(spec: str, name: str, value: str) -> float:
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"--faults {spec!r}: {name}={value!r} must be a chance in [0, 1]")
    return rate


def _option(spec: str, name: str, value: str) -> Any:
    try:
        parsed = _OPTIONS[name](value)
    except ValueError:
        parsed = -1
    if parsed < 0:
        raise ConfigError(f"--faults {spec!r}: {name}={value!r} must be a {_OPTIONS[name].__name__} >= 0")
    return parsed


def half_chunk(data: bytes) -> bytes:
    """The first half of `data` framed as an HTTP chunk: what a connection cut inside the chunk delivers.

    >>> half_chunk(b"data: {}")
    b'8\\r\\ndat'
    """
    framed = b"%x\r\n%s\r\n" % (len(data), data)
    return framed[: len(framed) // 2]
