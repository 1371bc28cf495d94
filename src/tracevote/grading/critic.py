"""The grading critic: an LLM reads the problem, the reference solution and a prediction's reasoning and scores
the reasoning from 1 to 5, as JSON ``{"score": x}``.

- Items: the first `max_samples` gold items, in gold order, that have a reference solution and a prediction
  (a pool's: its lowest-numbered trace).
- Reply: the last JSON object in the text with a numeric `score` (a number, or text that reads as one),
  clamped to [1, 5]; a reply without one is unparsable: counted, and left out of the mean.
- Structured replies (`structured=True`, for endpoints that honour OpenAI's json_schema response format): each
  request carries RESPONSE_FORMAT, and a reply that is exactly ``{"score": <number>}`` is read as such first;
  any other reply is read as free text, as above. The setting records it, so structured replies have a ledger
  of their own.
- Calls are paid calls on a CallLedger (durable, resumable, never paid twice): one ledger per critic setting
  (endpoint, model, prompt, temperature, max_tokens), one item per prompt, named by the prompt's digest, so a
  prediction graded twice (two runs, or the CLI after the stage) is asked about once.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from tracevote.core.config import Params
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import with_effort
from tracevote.core.costs import CostEstimate, estimate, prompt_bytes, simulated_as
from tracevote.core.errors import DataError
from tracevote.critique.critic_prompt import CRITIC, CRITIC_TEMPLATE, PROMPT_VERSION, critic_messages
from tracevote.grading.accuracy import Pairing
from tracevote.grading.gold import GoldItem
from tracevote.grading.predictions import Prediction
from tracevote.store.calls import Call, CallLedger, decode
from tracevote.store.ledger import fingerprint_of, folder_name

METHOD = "grading-critic"
SCORE_RANGE = (1.0, 5.0)
SCORE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"],
                                "additionalProperties": False}
RESPONSE_FORMAT: dict[str, Any] = {"type": "json_schema",
                                   "json_schema": {"name": "critic_score", "strict": True, "schema": SCORE_SCHEMA}}


@dataclass(frozen=True)
class CriticItem:
    """One critic call: which gold item, the prompt, and the prompt's digest that names it in the ledger."""

    gold_id: str
    item_id: str
    messages: list[dict[str, str]]
    reasoning: str


def critic_items(pairing: Pairing, max_samples: int) -> list[CriticItem]:
    """The first `max_samples` gold items with a reference solution and a prediction, in gold order."""
    first: dict[str, tuple[GoldItem, Prediction]] = {}
    for item, prediction in pairing.pairs:
        if item.reference is not None and item.id not in first:
            first[item.id] = (item, prediction)
    chosen = list(first.values())[:max_samples]
    return [_critic_item(item, prediction) for item, prediction in chosen]


def _critic_item(item: GoldItem, prediction: Prediction) -> CriticItem:
    assert item.reference is not None
    messages = critic_messages(item.problem, item.reference, prediction.thinking)
    digest = hashlib.sha256(orjson.dumps(messages)).hexdigest()[:32]
    return CriticItem(item.id, f"critic-{digest}", messages, prediction.thinking)


def structured_replies(params: Params) -> bool:
    """Whether the critic asks for a {"score": x} reply by JSON schema: where its endpoint's profile has them
    (OpenAI's models, local servers' guided decoding); DeepSeek offers only json_object, so it gets today's text."""
    return params.critic_model.profile.structured_output == "json_schema"


def critic_decoding(params: Params) -> DecodingConfig:
    cfg = params.grading.critic
    return DecodingConfig(temperature=cfg.temperature, top_p=None, max_tokens=cfg.max_tokens, top_logprobs=0)


def critic_setting(params: Params, *, structured: bool = False) -> dict[str, Any]:
    """Everything that decides a critic request but the prompt itself: its hash names the ledger. Like a pool's
    setting it leaves out the server's URL, so adding a replica (or moving one) keeps the replies paid for.
    `structured` and the endpoint's reasoning_effort count only when set, so older ledgers keep their names."""
    model, cfg = params.critic_model, params.grading.critic
    setting = {"method": METHOD, "prompt_version": PROMPT_VERSION, "template": CRITIC_TEMPLATE,
               "backend": model.backend, "model": model.name, "extra_body": model.extra_body,
               "sim": asdict(model.sim) if model.backend == "sim" else None,
               "temperature": cfg.temperature, "max_tokens": cfg.max_tokens}
    setting = with_effort(setting, model)
    return {**setting, "response_format": RESPONSE_FORMAT} if structured else setting


def ledger_root(critic_dir: Path, params: Params, *, structured: bool = False) -> Path:
    model = params.critic_model
    return critic_dir / folder_name(model.name, fingerprint_of(critic_setting(params, structured=structured)),
                                    simulated=model.backend == "sim")


def open_ledger(critic_dir: Path, params: Params, *, structured: bool = False) -> CallLedger:
    """The critic ledger of this setting under `critic_dir` (created when absent)."""
    return CallLedger.open_at(ledger_root(critic_dir, params, structured=structured),
                              critic_setting(params, structured=structured),
                              simulated=params.critic_model.backend == "sim")


def register_items(ledger: CallLedger, items: Sequence[CriticItem]) -> None:
    """Record each item's prompt digest in the ledger's items.json, as every ledger does, so that `ledger verify`
    knows each of its logs."""
    ledger.register_digests({item.item_id: hashlib.sha256(orjson.dumps(item.messages)).hexdigest() for item in items},
                            what="critic prompt")


def critic_calls(items: Sequence[CriticItem], *, structured: bool = False) -> list[Call]:
    """One call per item; `structured`: each asks for RESPONSE_FORMAT."""
    extra = {"response_format": RESPONSE_FORMAT} if structured else None
    return [Call(item.item_id, 0, CRITIC, item.messages, extra=extra) for item in items]


def missing_calls(ledger: CallLedger, items: Sequence[CriticItem], *, structured: bool = False) -> list[Call]:
    unstored = ledger.missing({item.item_id: [0] for item in items})
    return [call for call in critic_calls(items, structured=structured) if call.item_id in unstored]


def calls_cost(calls: Sequence[Call], params: Params) -> CostEstimate:
    sizes = [prompt_bytes(call.messages) for call in calls]
    return estimate(sizes, params.grading.critic.max_tokens, params.critic_model.priced(),
                    simulated_as=simulated_as(params.critic_model))


def parse_score(text: str) -> float | None:
    """The last JSON object in `text` with a numeric "score" (the one ending last; of nested ones, the outermost),
    clamped to [1, 5]; None when there is none.

    >>> parse_score('Good work. {"score": 4}'), parse_score('{"score": 9}'), parse_score('{"score": "2.5"}')
    (4.0, 5.0, 2.5)
    >>> parse_score("I would give it a 4.") is None
    True
    """
    for value in _json_objects_from_end(text):
        score = _numeric(value.get("score"))
        if score is not None:
            return _clamped(score)
    return None


def parse_structured_score(text: str) -> float | None:
    """The score of a reply that is the schema's object and nothing else, ``{"score": <number>}``, clamped to
    [1, 5] (the schema bounds nothing); None for any other reply.

    >>> parse_structured_score('{"score": 4.5}'), parse_structured_score('{"score": "4"}')
    (4.5, None)
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or set(value) != {"score"}:
        return None
    score = value["score"]
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        return None
    return _clamped(float(score))


def reply_score(text: str, *, structured: bool) -> float | None:
    """A reply's score: when `structured`, the schema's object first; then (always) the free-text reading, for
    an endpoint that ignored the response format. None: the reply gave no score (unparsable), never a 1.

    >>> reply_score('Fine work. {"score": 4}', structured=True), reply_score("four", structured=True)
    (4.0, None)
    """
    score = parse_structured_score(text) if structured else None
    return parse_score(text) if score is None else score


def _clamped(score: float) -> float:
    return min(max(score, SCORE_RANGE[0]), SCORE_RANGE[1])


def _json_objects_from_end(text: str) -> Iterator[dict[str, Any]]:
    """Each JSON object in `text`, the one ending last first (an enclosing object before those inside it)."""
    spans = [(start, end) for start in (m.start() for m in re.finditer(r"\{", text))
             if (end := _closing_brace(text, start)) is not None]
    for start, end in sorted(spans, key=lambda span: (-span[1], span[0])):
        try:
            value = orjson.loads(text[start:end + 1])
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def _closing_brace(text: str, start: int) -> int | None:
    """The index of the '}' closing the '{' at `start`, skipping braces inside JSON strings."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True)
class CriticScores:
    """The critic's mean over the items it scored, and each item's score (None: unparsable)."""

    mean: float | None
    scored: int
    unparsable: int
    scores: dict[str, float | None]  # gold id -> score
    usd: float
    context_failed: int = 0  # refused by the server as longer than the model's window (not counted unparsable)


def read_scores(ledger: CallLedger, items: Sequence[CriticItem], origin: str, *,
                structured: bool = False) -> CriticScores:
    """The stored replies' scores (read as reply_score does); an item without a stored reply is an error naming
    what to run."""
    scores: dict[str, float | None] = {}
    spent, refused = 0.0, 0
    for item in items:
        payloads = [payload for key, payload in ledger.iter_payloads(item.item_id) if key == 0]
        if not payloads:
            raise DataError(f"{origin}: the critic's reply for gold item {item.gold_id!r} is not in {ledger.root}; "
                            f"run the critic first (`dvc repro` runs build_grading_critic)")
        record = decode(payloads[0])
        scores[item.gold_id] = reply_score(record.text, structured=structured)
        spent += record.usd
        refused += record.failed_for_context
    parsed = [score for score in scores.values() if score is not None]
    return CriticScores(mean=sum(parsed) / len(parsed) if parsed else None, scored=len(parsed),
                        unparsable=len(scores) - len(parsed) - refused, scores=scores, usd=spent,
                        context_failed=refused)
