"""Whether an endpoint is answered by tracevote's simulator, known before a paid stage's opening estimate, so that
the estimate says SIMULATED (and what it would cost if it were the priced model) instead of a bill.

`model.backend: sim` is simulated by definition. Behind `backend: openai`, a `python -m tracevote sim-server`
says so in every reply, but the estimate comes before any request; so each server of the endpoint is asked for
its model list (GET <base_url>/models: free, no key sent), which the simulator signs with MODELS_OWNER. Only
servers on this machine or a private network are asked: a provider on the internet is never contacted before the
stage decides to, and anything that does not answer as the simulator within the timeout counts as real.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

import orjson

from tracevote.core.config_endpoints import ModelConfig, base_urls
from tracevote.core.costs import CostEstimate
from tracevote.core.hosts import host_address
from tracevote.core.simulated import MODELS_OWNER

ASK_TIMEOUT_S = 5.0  # a local server answers its model list at once; a busy machine still answers in this


def as_served(cost: CostEstimate, *models: ModelConfig) -> CostEstimate:
    """`cost` as the opening estimate prints it: priced as the first model's name and marked simulated when every
    one of `models` is served by the simulator (asked only when the cost is not already simulated)."""
    if cost.simulated_as is not None or not all(served_by_simulator(model) for model in models):
        return cost
    return dataclasses.replace(cost, simulated_as=models[0].name)


def served_by_simulator(model: ModelConfig) -> bool:
    """The in-process simulator, or every server of the endpoint a local sim-server."""
    if model.backend == "sim":
        return True
    return all(is_local(url) and _lists_as_simulator(url) for url in base_urls(model.base_url))


def is_local(base_url: str) -> bool:
    """localhost, or a literal loopback or private address: no name is resolved."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    address = host_address(host)
    return address is not None and (address.is_loopback or address.is_private)


def _lists_as_simulator(base_url: str) -> bool:
    import requests  # here: only an openai endpoint on a local server is asked; `backend: sim` never loads it

    try:
        response = requests.get(f"{base_url.rstrip('/')}/models", timeout=ASK_TIMEOUT_S)
        listed = orjson.loads(response.content).get("data") if response.ok else None
    except (requests.RequestException, orjson.JSONDecodeError, AttributeError):
        return False
    return bool(listed) and all(isinstance(entry, dict) and entry.get("owned_by") == MODELS_OWNER
                                for entry in listed)
