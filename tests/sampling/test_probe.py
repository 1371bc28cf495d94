"""The probe tells an informative server from one whose logprobs say nothing, and says what to try."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import EndpointError, EndpointNotFoundError, FatalAPIError
from tracevote.core.retry import Backoff
from tracevote.sampling.client import ChatClient
from tracevote.sampling.probe import ProbeReport, run_probe
from tracevote.sim.faults import FaultPlan, parse_faults
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, start_server, stop_server

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)


@contextlib.contextmanager
def probed(temperature: float = 0.6, top_logprobs: int = 20, faults: str = "", name: str = "deepseek-v4-flash",
           path: str = "", **options: Any) -> Iterator[ProbeReport]:
    server = start_server(SimModel(SIM), parse_faults(faults) if faults else FaultPlan(), ServerOptions(**options))
    try:
        model = ModelConfig(backend="openai", base_url=server.base_url + path, name=name, extra_body={},
                            api_key_env="TRACEVOTE_TEST_KEY", needs_key=False, sim=SIM)
        decoding = DecodingConfig(temperature=temperature, top_p=None, max_tokens=512, top_logprobs=top_logprobs)
        client = ChatClient(model, decoding, api_key=None, timeout_s=5.0, max_retries=3,
                            backoff=Backoff(initial_s=0.001, max_s=0.01))
        yield run_probe(client)
    finally:
        stop_server(server)


def test_a_sampling_server_is_informative() -> None:
    with probed() as report:
        assert report.informative and report.problems == ()
        assert report.model_found and report.logprobs_present
        assert report.effective_k == 20 and report.sentinel_fraction == 0
        assert report.confidence_std > 0.1
        assert report.n_responses == 3 and report.completion_tokens > 0
        assert report.simulated
        assert "verdict:           informative" in report.render()


def test_temperature_zero_is_uninformative_and_says_to_raise_it() -> None:
    with probed(temperature=0.0) as report:
        assert not report.informative
        assert report.logprobs_present and report.effective_k == 1 and report.sentinel_fraction == 0.95
        assert report.confidence_std == 0
        assert any("temperature 0" in p and "raise decoding.temperature" in p for p in report.problems)
        assert "NOT informative" in report.render()


def test_a_server_sending_only_sentinels_is_uninformative() -> None:
    with probed(faults="sentinel=1.0,max_per_sample=100") as report:
        assert not report.informative
        assert report.sentinel_fraction == 1 and report.effective_k == 0
        assert any("sentinels" in p for p in report.problems)


def test_a_server_without_logprobs_says_how_to_enable_them() -> None:
    with probed(faults="nologprobs=1.0,max_per_sample=100") as report:
        assert not report.informative and not report.logprobs_present
        assert any("--max-logprobs 20" in p for p in report.problems)


def test_an_unknown_model_is_reported_by_name() -> None:
    with probed(name="deepseek-chat", models=("deepseek-v4-flash",)) as report:
        assert not report.model_found and not report.informative
        assert "deepseek-chat" in report.problems[0] and "deepseek-v4-flash" in report.problems[0]


def test_a_wrong_path_is_an_error_about_base_url_not_the_model() -> None:
    with pytest.raises(EndpointNotFoundError) as caught, probed(path="/v2"):
        pass
    message = str(caught.value)
    assert "/v2/chat/completions answered 404" in message and "endpoints.deepseek.base_url" in message


def test_a_server_failing_every_retry_is_an_endpoint_error_naming_the_cause() -> None:
    with pytest.raises(EndpointError) as caught, probed(faults="503=1.0,max_per_sample=100"):
        pass
    assert "kept failing until its retries ran out: HTTP 503" in str(caught.value)


def test_top_logprobs_zero_falls_back_to_the_chosen_token() -> None:
    with probed(top_logprobs=0) as report:
        assert report.informative
        assert any("top_logprobs is 0" in note for note in report.notes)


def test_a_refused_key_stops_the_probe() -> None:
    with pytest.raises(FatalAPIError), probed(api_key="sk-required"):
        pass
