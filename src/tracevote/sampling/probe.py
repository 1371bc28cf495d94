"""Before paying for a pool: do this model and these settings return logprobs that carry a signal?

A few short requests at the configured decoding settings answer: is the model there, are logprobs
present, how many top-k entries are real values (not -9999 sentinels), and does the token confidence
C_i vary at all. DeepSeek at temperature 0 reports 0.0 for the chosen token and -9999 for the rest,
so every C_i is 0 and confidence voting degenerates into majority voting.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from tracevote.core.errors import EndpointError, EndpointNotFoundError, FatalAPIError, ModelNotFoundError, QuotaError
from tracevote.core.retry import TransientError
from tracevote.core.simulated import FINGERPRINT_PREFIX, SOLVE
from tracevote.sampling.client import ChatClient
from tracevote.sampling.ingest import load_json
from tracevote.store.logprobs import SENTINEL_LOGPROB, token_confidence

PROBE_PROMPT = "What is 17 + 25? Answer with the number only."
PROBE_MAX_TOKENS = 48
MIN_CONFIDENCE_STD = 1e-6


@dataclass(frozen=True)
class _Logprobs:
    """What one response's logprobs hold."""

    present: bool
    tokens: int = 0
    entries: int = 0  # top-k entries sent
    sentinels: int = 0  # of which -9999 or not finite
    confidence: np.ndarray = field(default_factory=lambda: np.zeros(0))  # C_i of each token


@dataclass(frozen=True)
class ProbeReport:
    model: str
    base_url: str
    temperature: float
    requested_k: int
    n_responses: int
    model_found: bool
    logprobs_present: bool
    sentinel_fraction: float  # of the top-k entries sent; NaN when none were
    effective_k: float  # mean real top-k entries per token
    confidence_std: float  # of C_i over all tokens of all responses; NaN when no token has one
    prompt_tokens: int
    completion_tokens: int
    n_without_logprobs: int  # responses that came back without logprobs
    simulated: bool  # the server is tracevote's simulated model (its system_fingerprint says so)
    problems: tuple[str, ...]  # each says why the logprobs are uninformative and what to try
    notes: tuple[str, ...] = ()  # worth knowing, not blocking

    @property
    def informative(self) -> bool:
        return not self.problems

    def render(self) -> str:
        k_line = (f"effective k {self.effective_k:.1f} of {self.requested_k} asked "
                  f"({_percent(self.sentinel_fraction)} sentinels)")
        varies = "varies" if self.confidence_std > MIN_CONFIDENCE_STD else "constant"
        lines = [
            f"probe of {self.model} at {self.base_url}: {self.n_responses} responses, "
            f"temperature {self.temperature}, top_logprobs {self.requested_k}",
            f"  model found:       {_yes(self.model_found)}{' (simulated)' if self.simulated else ''}",
            f"  logprobs present:  {_yes(self.logprobs_present)}",
            f"  top-k entries:     {k_line}",
            f"  token confidence:  {varies} (std {self.confidence_std:.3g})",
            f"  usage:             {self.prompt_tokens} prompt + {self.completion_tokens} completion tokens",
            f"  verdict:           {'informative' if self.informative else 'NOT informative'}",
        ]
        lines += [f"  problem: {problem}" for problem in self.problems]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)


def run_probe(client: ChatClient, n_requests: int = 3) -> ProbeReport:
    """Send `n_requests` short requests (at least one per endpoint) with the client's settings and judge their
    logprobs.

    An unknown model is a report with model_found false; a wrong path, a refused key and an
    unreachable endpoint raise (EndpointNotFoundError, FatalAPIError, EndpointError).
    """
    messages = [{"role": "user", "content": PROBE_PROMPT}]
    docs: list[dict[str, Any]] = []
    for i in range(max(n_requests, len(client.endpoints))):
        try:
            raw = client.complete_raw(messages, sample_key=f"probe/{i}", max_tokens=PROBE_MAX_TOKENS)
        except ModelNotFoundError as exc:
            return _not_found(client, str(exc))
        except TransientError as exc:
            raise EndpointError(f"the probe's request to {client.url} kept failing until its retries ran out: "
                                f"{exc}") from None
        docs.append(load_json(raw.body))
    return _judge(client, docs)


@dataclass(frozen=True)
class NProbe:
    """Whether the server honoured a request for two choices, and what that request was billed."""

    honoured: bool
    choices: int
    prompt_tokens: int
    completion_tokens: int
    refusal: str = ""  # the server's words when it refused n (llama.cpp's llama-server: HTTP 500)


def probe_n(client: ChatClient) -> NProbe:
    """A short request with n=2: two choices back mean the server honours `n` (vLLM, SGLang, OpenAI); one means it
    ignores it (llama-cpp-python's server answers one choice whatever n says). A refusal (llama.cpp's llama-server
    answers HTTP 500 "Only one completion choice is allowed"; another server may say 400) is not retried: it too
    means n is not honoured."""
    body = client.request_body([{"role": "user", "content": PROBE_PROMPT}], max_tokens=PROBE_MAX_TOKENS,
                               sample_key="probe/n", extra={"n": 2})
    payload = orjson.dumps(body)
    try:
        raw = client.post(payload, "probe/n", SOLVE, lambda raw: raw, retries=0)
    except TransientError as failed:
        if failed.cause != "HTTP 500":
            raw = client.post(payload, "probe/n", SOLVE, lambda raw: raw)  # a passing failure: asked as any call
        else:
            return NProbe(False, 0, 0, 0, refusal=str(failed))
    except (QuotaError, ModelNotFoundError, EndpointNotFoundError):
        raise
    except FatalAPIError as refused:
        return NProbe(False, 0, 0, 0, refusal=str(refused))
    doc = load_json(raw.body)
    choices = doc.get("choices") if isinstance(doc, dict) else None
    usage = (doc.get("usage") if isinstance(doc, dict) else None) or {}
    count = len(choices) if isinstance(choices, list) else 0
    return NProbe(count >= 2, count, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))


def samples_per_request(client: ChatClient, wanted: int, say: Callable[[str], None]) -> tuple[int, NProbe | None]:
    """The traces each request may ask for: `wanted` (pool.samples_per_request) where the endpoint's profile and
    probe_n say it honours `n`, else 1, said once through `say`; and the n probe, when one was sent."""
    if wanted == 1:
        return 1, None
    model = client.model
    if not model.profile.honours_n:
        say(f"pool.samples_per_request is {wanted}, but endpoint {model.endpoint} (profile {model.profile.name}) "
            f"does not honour n: one trace per request")
        return 1, None
    probe = probe_n(client)
    if probe.refusal:
        say(f"pool.samples_per_request is {wanted}, but {_where(client)} refused a request for n=2 "
            f"({probe.refusal}): one trace per request")
        return 1, probe
    if not probe.honoured:
        say(f"pool.samples_per_request is {wanted}, but {_where(client)} answered a request for n=2 with "
            f"{probe.choices} choice{'s' if probe.choices != 1 else ''} (it ignores n, as llama-cpp-python's server "
            f"does): one trace per request")
        return 1, probe
    return wanted, probe


def _not_found(client: ChatClient, message: str) -> ProbeReport:
    return ProbeReport(
        model=client.model.name, base_url=_where(client), temperature=client.decoding.temperature,
        requested_k=client.decoding.top_logprobs, n_responses=0, model_found=False, logprobs_present=False,
        sentinel_fraction=math.nan, effective_k=0.0, confidence_std=math.nan, prompt_tokens=0,
        completion_tokens=0, n_without_logprobs=0, simulated=False, problems=(message,))


def _judge(client: ChatClient, docs: list[dict[str, Any]]) -> ProbeReport:
    found = [_logprobs_of(doc) for doc in docs]
    present = [f for f in found if f.present]
    tokens = sum(f.tokens for f in present)
    entries = sum(f.entries for f in present)
    sentinels = sum(f.sentinels for f in present)
    confidence = np.concatenate([f.confidence for f in present] or [np.zeros(0)])
    confidence = confidence[np.isfinite(confidence)]
    usage = [doc.get("usage") or {} for doc in docs]
    report = ProbeReport(
        model=client.model.name, base_url=_where(client), temperature=client.decoding.temperature,
        requested_k=client.decoding.top_logprobs, n_responses=len(docs), model_found=True,
        logprobs_present=tokens > 0,
        sentinel_fraction=sentinels / entries if entries else math.nan,
        effective_k=(entries - sentinels) / tokens if tokens else 0.0,
        confidence_std=float(confidence.std()) if len(confidence) else math.nan,
        prompt_tokens=sum(int(u.get("prompt_tokens") or 0) for u in usage),
        completion_tokens=sum(int(u.get("completion_tokens") or 0) for u in usage),
        n_without_logprobs=len(found) - len(present),
        simulated=any(str(doc.get("system_fingerprint", "")).startswith(FINGERPRINT_PREFIX) for doc in docs),
        problems=(), notes=())
    problems, notes = _diagnose(report)
    return dataclasses.replace(report, problems=problems, notes=notes)


def _logprobs_of(doc: dict[str, Any]) -> _Logprobs:
    choices = doc.get("choices") or [{}]
    logprobs = choices[0].get("logprobs")
    items = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(items, list) or not items:
        return _Logprobs(present=False)
    chosen = np.array([item.get("logprob") for item in items], dtype=np.float64)
    rows = [[entry.get("logprob") for entry in item.get("top_logprobs") or []] for item in items]
    width = max((len(row) for row in rows), default=0)
    top = np.full((len(rows), width), np.nan)
    for i, row in enumerate(rows):
        top[i, : len(row)] = np.array(row, dtype=np.float64)
    sent = ~np.isnan(top) if width else np.zeros((len(rows), 0), dtype=bool)
    real = sent & np.isfinite(top) & (top > SENTINEL_LOGPROB)
    return _Logprobs(present=True, tokens=len(items), entries=int(sent.sum()),
                     sentinels=int((sent & ~real).sum()),
                     confidence=token_confidence(top if width else None, chosen))


def _diagnose(report: ProbeReport) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(problems, notes) for a probe whose model was found."""
    problems: list[str] = []
    notes: list[str] = []
    if not report.logprobs_present:
        problems.append("the server returned no logprobs: for vLLM start it with --max-logprobs 20; for SGLang "
                        "and llama.cpp check that the server supports logprobs in chat completions")
        return tuple(problems), tuple(notes)
    if report.n_without_logprobs:
        notes.append(f"{report.n_without_logprobs} of {report.n_responses} responses had no logprobs; the "
                     f"verdict rests on the others")
    k = report.requested_k
    fraction = report.sentinel_fraction
    if k == 0:
        notes.append("decoding.top_logprobs is 0: C_i falls back to -logprob of the chosen token; "
                     "DeepConf uses top_logprobs 20")
    elif report.temperature == 0 and (fraction > 0.5 or not report.confidence_std > MIN_CONFIDENCE_STD):
        problems.append("temperature 0 makes DeepSeek report 0.0 for the chosen token and -9999 for every "
                        "other top-k entry: raise decoding.temperature (e.g. 0.6)")
    elif math.isnan(fraction):
        problems.append(f"the server returned no top_logprobs entries although {k} were asked for: check that "
                        f"it supports top_logprobs (vLLM: --max-logprobs {k})")
    elif fraction > 0.5 and report.effective_k <= 1.0:
        problems.append(f"{_percent(fraction)} of the top-k entries are -9999 sentinels (effective k "
                        f"{report.effective_k:.1f} of {k}): the server reports no real alternatives; check "
                        f"decoding.temperature and top_p, or try another server")
    elif report.effective_k < 0.9 * k:
        notes.append(f"only {report.effective_k:.1f} of {k} top-k entries per token carry a value: the server "
                     f"caps or pads top_logprobs; C_i averages over the real ones")
    if not problems and not report.confidence_std > MIN_CONFIDENCE_STD:
        problems.append(f"token confidence is constant (std {report.confidence_std:.3g}) across "
                        f"{report.n_responses} responses: the logprobs carry no signal; raise "
                        f"decoding.temperature or check the server's logprob settings")
    return tuple(problems), tuple(notes)


def _where(client: ChatClient) -> str:
    return ", ".join(endpoint.base_url for endpoint in client.endpoints)


def _percent(fraction: float) -> str:
    return "n/a" if math.isnan(fraction) else f"{100 * fraction:.0f}%"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
