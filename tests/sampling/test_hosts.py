"""Issue 30 item 3: where a request and its key may go (tracevote.core.hosts), and the client checking it again
where requests are sent, with URL credentials never shown."""

from __future__ import annotations

import pytest

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import ConfigError
from tracevote.core.hosts import forbidden_host, key_hosts, redact_urls, serves
from tracevote.sampling.client import ChatClient
from tracevote.sampling.endpoints import Endpoint

SIM = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60)
DECODING = DecodingConfig(temperature=0.6, top_p=None, max_tokens=64, top_logprobs=0)


@pytest.mark.parametrize(("host", "forbidden"), [
    ("169.254.169.254", True), ("169.254.0.1", True), ("2852039166", True), ("0xa9fea9fe", True),
    ("169.254.43518", True), ("fe80::1", True), ("::ffff:169.254.169.254", True), ("fd00:ec2::254", True),
    ("100.100.100.200", True), ("metadata.google.internal", True), ("METADATA.google.internal.", True),
    ("instance-data", True),
    ("127.0.0.1", False), ("localhost", False), ("10.0.0.5", False), ("gpu1", False), ("api.openai.com", False),
    ("::1", False), ("2130706433", False),  # 127.0.0.1 spelt as one number: loopback, allowed
])
def test_link_local_and_metadata_hosts_are_forbidden(host: str, forbidden: bool) -> None:
    assert (forbidden_host(host) is not None) is forbidden


@pytest.mark.parametrize(("env", "host", "own"), [
    ("OPENAI_API_KEY", "api.openai.com", True), ("OPENAI_API_KEY", "eu.api.openai.com", True),
    ("OPENAI_API_KEY", "evilopenai.com", False), ("OPENAI_API_KEY", "api.openai.com.evil.example", False),
    ("OPENAI_API_KEY", "api.deepseek.com", False), ("DEEPSEEK_API_KEY", "api.deepseek.com", True),
    ("AZURE_OPENAI_API_KEY", "team.openai.azure.com", True), ("AZURE_OPENAI_API_KEY", "api.openai.com", False),
])
def test_a_providers_key_belongs_to_its_hosts(env: str, host: str, own: bool) -> None:
    domains = key_hosts(env)
    assert domains is not None and serves(host, domains) is own


def test_a_variable_no_provider_names_may_go_anywhere() -> None:
    assert key_hosts("VLLM_API_KEY") is None and key_hosts("TRACEVOTE_TEST_KEY") is None


@pytest.mark.parametrize(("text", "shown"), [
    ("cannot connect to https://me:s3cret@gw.example/v1/chat", "cannot connect to https://***@gw.example/v1/chat"),
    ("'http://token@10.0.0.2:8000/v1' and http://a:b@c/x", "'http://***@10.0.0.2:8000/v1' and http://***@c/x"),
    ("https://api.openai.com/v1 (user@example.com)", "https://api.openai.com/v1 (user@example.com)"),
])
def test_url_credentials_are_redacted(text: str, shown: str) -> None:
    assert redact_urls(text) == shown


def model(base_url: str, *, env: str = "DEEPSEEK_API_KEY", allow: bool = False) -> ModelConfig:
    return ModelConfig(backend="openai", base_url=base_url, name="m", extra_body={}, api_key_env=env,
                       needs_key=True, sim=SIM, endpoint="e", allow_foreign_key=allow)


def client(config: ModelConfig) -> ChatClient:
    return ChatClient(config, DECODING, api_key="sk-canary-1", timeout_s=5, max_retries=0)


@pytest.mark.parametrize(("base_url", "message"), [
    ("http://127.0.0.1:9/v1", "is not an https URL of deepseek.com, and $DEEPSEEK_API_KEY is that provider's key"),
    ("http://api.deepseek.com", "is not an https URL of deepseek.com"),
    ("http://169.254.169.254/v1", "must be a model server, not a link-local address"),
    ("http://user:pw@localhost.localdomain/v1", "'http://***@localhost.localdomain/v1'"),
    ("file:///etc/passwd", "must be an http(s) URL with a host"),
])
def test_the_client_refuses_before_sending(base_url: str, message: str) -> None:
    """A ModelConfig made in code skips check_params: the client applies its rules again."""
    with pytest.raises(ConfigError) as caught:
        client(model(base_url))
    assert message in str(caught.value) and "sk-canary-1" not in str(caught.value) and "pw@" not in str(caught.value)


def test_a_gateway_trusted_with_the_key_and_a_key_no_provider_names_are_allowed() -> None:
    assert client(model("http://127.0.0.1:9/v1", allow=True)).url == "http://127.0.0.1:9/v1/chat/completions"
    assert client(model("http://127.0.0.1:9/v1", env="VLLM_API_KEY")).capacity > 0
    assert client(model("https://api.deepseek.com")).url == "https://api.deepseek.com/chat/completions"


def test_an_endpoint_shows_its_url_without_credentials_and_posts_to_the_real_one() -> None:
    import threading

    endpoint = Endpoint("https://me:s3cret@gw.example/v1/", 1, threading.Condition())
    assert endpoint.chat_url == "https://***@gw.example/v1/chat/completions"
    assert "s3cret" not in endpoint.render() and "s3cret" not in repr(endpoint)
    assert endpoint.post_url == "https://me:s3cret@gw.example/v1/chat/completions"
