"""How requests are placed over several endpoints: spread evenly, a failing one set aside, tried again later."""

from __future__ import annotations

import pytest

from tests.sampling.test_client import DECODING, FAST
from tests.sim_servers import refusing_urls
from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import ConfigError, EndpointError
from tracevote.core.typedconfig import build
from tracevote.sampling.client import ChatClient
from tracevote.sampling.endpoints import Endpoint, EndpointPolicy, EndpointPool

POLICY = EndpointPolicy(set_aside_after=3, cooldown_s=10.0, max_cooldown_s=25.0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pool_of(n: int, concurrency: int = 2) -> tuple[EndpointPool, Clock]:
    clock = Clock()
    return EndpointPool(tuple(f"http://replica{i}:8000/v1" for i in range(n)), concurrency, POLICY, clock), clock


def next_endpoint(pool: EndpointPool, tried: tuple[Endpoint, ...] = ()) -> Endpoint:
    """Where the next request goes, when it is answered at once."""
    with pool.slot(tried) as slot:
        slot.succeeded()
        return slot.endpoint


def fail(pool: EndpointPool, endpoint: Endpoint, times: int) -> None:
    """`times` requests sent to `endpoint` (the others being full or tried), each failing."""
    others = tuple(e for e in pool if e is not endpoint)
    for _ in range(times):
        with pool.slot(others) as slot:
            assert slot.endpoint is endpoint
            slot.failed("HTTP 500")


def test_idle_endpoints_share_requests_evenly_and_busy_ones_get_fewer() -> None:
    pool, _ = pool_of(3)
    assert [next_endpoint(pool) for _ in range(6)] == list(pool.endpoints) * 2
    with pool.slot() as held:  # replica0 now has less room than the others
        assert held.endpoint.base_url.endswith("replica0:8000/v1")
        assert {next_endpoint(pool).base_url for _ in range(4)} == {e.base_url for e in pool.endpoints[1:]}


def test_a_retry_prefers_an_endpoint_it_has_not_failed_on() -> None:
    pool, _ = pool_of(2)
    first, second = pool.endpoints
    assert next_endpoint(pool, tried=(first,)) is second
    assert next_endpoint(pool, tried=(first, second)) in (first, second)  # all tried: any will do


def test_a_failing_endpoint_is_set_aside_then_tried_alone_and_back_in_rotation_on_success() -> None:
    pool, clock = pool_of(2)
    good, bad = pool.endpoints
    fail(pool, bad, 3)
    assert bad.set_aside_until == clock.now + 10.0 and bad.times_set_aside == 1
    assert {next_endpoint(pool) for _ in range(5)} == {good}

    clock.now += 10.0  # the cooldown is over: one trial request at a time
    with pool.slot((good,)) as trial:
        assert trial.endpoint is bad and trial.trial
        assert {next_endpoint(pool) for _ in range(3)} == {good}  # no second request while the trial runs
        trial.succeeded()
    assert bad.set_aside_until is None
    assert {next_endpoint(pool) for _ in range(4)} == {good, bad}
    assert "set aside 1 time" in bad.render() and "still" not in bad.render()


def test_a_failed_trial_doubles_the_cooldown_up_to_its_cap() -> None:
    pool, clock = pool_of(2)
    _, bad = pool.endpoints
    fail(pool, bad, 3)
    cooldowns = []
    for _ in range(3):
        clock.now = bad.set_aside_until
        fail(pool, bad, 1)
        cooldowns.append(bad.set_aside_until - clock.now)
    assert cooldowns == [20.0, 25.0, 25.0]
    assert bad.times_set_aside == 4 and "(still set aside)" in bad.render()
    assert bad.render().startswith(f"{bad.base_url}: 0 served, 6 failed (HTTP 500 6)")


def test_the_last_endpoint_in_rotation_is_never_set_aside() -> None:
    pool, _ = pool_of(2)
    first, second = pool.endpoints
    fail(pool, first, 3)
    fail(pool, second, 10)
    assert first.set_aside_until is not None and second.set_aside_until is None
    single, _ = pool_of(1)
    fail(single, single.endpoints[0], 10)
    assert single.endpoints[0].set_aside_until is None


def test_failures_below_the_threshold_or_interrupted_by_a_success_keep_an_endpoint() -> None:
    pool, _ = pool_of(2)
    _, flaky = pool.endpoints
    for _ in range(4):
        fail(pool, flaky, 2)
        with pool.slot((pool.endpoints[0],)) as slot:
            slot.succeeded()
    assert flaky.set_aside_until is None and flaky.failures["HTTP 500"] == 8


def test_capacity_is_the_concurrency_of_every_endpoint() -> None:
    pool, _ = pool_of(3, concurrency=16)
    assert pool.capacity == 48 and len(pool) == 3


MODEL = {"backend": "openai", "name": "m", "extra_body": {}, "api_key_env": "K", "needs_key": False,
         "sim": SimConfig(seed=0, signal=1.0, accuracy=0.5, mean_tokens=100).__dict__}


@pytest.mark.parametrize(("base_url", "message"), [
    ([], "model.base_url: [] must be an http(s) URL or a non-empty list of them"),
    (["http://a/v1", 7], "model.base_url[1]: expected a string, got 7"),
    (["http://a/v1", "ftp://b"], "model.base_url[1]: 'ftp://b' must be an http(s) URL with a host"),
    (["http://a/v1", "http://a/v1/"], "model.base_url: 'http://a/v1' must be listed only once"),
    ({"url": "http://a/v1"}, "model.base_url: expected a single value or a list, got {'url': 'http://a/v1'}"),
])
def test_a_bad_list_of_endpoints_is_refused_naming_the_entry(base_url: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build(ModelConfig, {**MODEL, "base_url": base_url}, "model")
    assert str(caught.value) == message


def test_a_list_of_endpoints_is_read_as_a_tuple() -> None:
    model = build(ModelConfig, {**MODEL, "base_url": ["http://a/v1", "http://b/v1"]}, "model")
    assert model.base_url == ("http://a/v1", "http://b/v1")


def test_when_no_endpoint_can_be_reached_one_error_names_them_all() -> None:
    with refusing_urls(2) as urls, pytest.raises(EndpointError) as caught:
        model = build(ModelConfig, {**MODEL, "base_url": urls}, "model")
        client = ChatClient(model, DECODING, api_key=None, timeout_s=5.0, max_retries=8, backoff=FAST)
        client.sample([{"role": "user", "content": "1+1?"}], problem_id="p", sample_id=0, keep_top_logprobs=True)
    assert str(caught.value).startswith(f"cannot connect to any of {urls[0]}/chat/completions, {urls[1]}"
                                        f"/chat/completions: connection refused (gave up after 3 attempts)")
    assert all(endpoint.failures["connection refused"] >= 1 for endpoint in client.endpoints)
