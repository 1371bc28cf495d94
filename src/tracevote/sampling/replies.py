"""One paid call that wants text, not logprobs: request it, read it, price it, and make its ledger record."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracevote.core.config_endpoints import PricingConfig
from tracevote.core.costs import usd_cached
from tracevote.core.errors import ContextLengthError
from tracevote.sampling.runner import Paid
from tracevote.store import calls
from tracevote.store.calls import CONTEXT_EXCEEDED, Call, CallRecord

if TYPE_CHECKING:  # handed a client: the HTTP stack loads where one opens (sampling.backend)
    from tracevote.sampling.client import ChatClient


def call_key_header(call: Call) -> str:
    """"<item>/<key>": the simulator seeds its reply with it, as it does a sample's."""
    return f"{call.item_id}/{call.key}"


def paid_reply(client: ChatClient, call: Call, pricing: PricingConfig) -> Paid[CallRecord]:
    """Request `call` (no logprobs), retried as every call is; the reply as the ledger stores it."""
    try:
        reply, latency_s = client.reply(call.messages, call_key=call_key_header(call), kind=call.kind,
                                        max_tokens=call.max_tokens, extra=call.extra)
    except ContextLengthError as refused:
        return failed_for_context(call, refused)
    cost = usd_cached(reply.prompt_tokens, reply.cached_prompt_tokens, reply.completion_tokens, pricing)
    record = CallRecord(key=str(call.key), kind=call.kind, request_sha256=call.request_sha256, text=reply.text,
                        finish_reason=reply.finish_reason, prompt_tokens=reply.prompt_tokens,
                        cached_prompt_tokens=reply.cached_prompt_tokens,
                        completion_tokens=reply.completion_tokens, usd=cost, latency_s=latency_s,
                        simulated=reply.simulated, reasoning_tokens=reply.reasoning_tokens)
    return Paid(record, calls.encode(record), reply.prompt_tokens, reply.completion_tokens, cost,
                simulated=reply.simulated)


def failed_for_context(call: Call, refused: ContextLengthError) -> Paid[CallRecord]:
    """The record of a call the server refused as too long for the model's window: stored like a reply, so a
    rerun does not ask again and a conversation goes on without it (a debate's agent casts no vote)."""
    record = CallRecord(key=str(call.key), kind=call.kind, request_sha256=call.request_sha256, text="",
                        finish_reason=CONTEXT_EXCEEDED, prompt_tokens=0, cached_prompt_tokens=0, completion_tokens=0,
                        usd=0.0, latency_s=0.0, simulated=refused.simulated)
    return Paid(record, calls.encode(record), 0, 0, 0.0, simulated=refused.simulated, failed_for_context=True)
