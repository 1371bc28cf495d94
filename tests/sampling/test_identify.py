"""A paid stage knows before its opening estimate whether a sim-server answers the endpoint: the simulator's model
list says so; any other server, one that does not answer, or a host on the internet (never asked) counts as real."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

import orjson

from tests.conftest import FIXTURE_PARAMS
from tests.rows_server import serving
from tracevote.core.config import load_params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.costs import estimate
from tracevote.sampling.identify import as_served, is_local, served_by_simulator
from tracevote.sim.faults import parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server


def served_at(*base_urls: str) -> ModelConfig:
    model = load_params(FIXTURE_PARAMS).deepconf_model
    return dataclasses.replace(model, backend="openai", base_url=base_urls[0] if len(base_urls) == 1 else base_urls)


@contextmanager
def vllm_like_server() -> Iterator[str]:
    """A loopback server listing its model as vLLM does (owned_by vllm)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = orjson.dumps({"object": "list", "data": [{"id": "qwen", "object": "model", "owned_by": "vllm"}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield f"{url}/v1"


def test_a_sim_server_is_known_before_any_request_and_the_estimate_says_simulated() -> None:
    with running_server(SimModel(load_params(FIXTURE_PARAMS).model.sim), parse_faults("")) as base_url:
        model = served_at(base_url)
        assert served_by_simulator(model)
        cost = estimate([400, 800], 1000, model.priced())
        assert "SIMULATED" not in cost.render()
        opening = as_served(cost, model)
        assert opening.usd == cost.usd and opening.simulated_as == model.name
        assert opening.render().endswith("(SIMULATED: nothing will be spent)")
        assert f"cost if this were {model.name} at list prices" in opening.render()


def test_a_real_server_or_one_that_does_not_answer_counts_as_real() -> None:
    with vllm_like_server() as vllm, running_server(SimModel(load_params(FIXTURE_PARAMS).model.sim)) as sim:
        assert not served_by_simulator(served_at(vllm))
        assert not served_by_simulator(served_at(sim, vllm))  # every server must be the simulator
        cost = estimate([400], 1000, served_at(vllm).priced())
        assert as_served(cost, served_at(sim), served_at(vllm)) is cost
    assert not served_by_simulator(served_at(vllm))  # stopped: nothing answers on that port now


def test_only_local_servers_are_asked() -> None:
    assert is_local("http://127.0.0.1:8000/v1") and is_local("http://localhost:8000/v1")
    assert is_local("http://10.1.2.3/v1") and is_local("http://[::1]:9000/v1")
    assert not is_local("https://api.deepseek.com") and not is_local("https://api.openai.com/v1")
    assert not is_local("http://8.8.8.8/v1")
    assert not served_by_simulator(served_at("https://api.deepseek.com"))  # answered without a request
