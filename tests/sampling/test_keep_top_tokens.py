"""pool.keep_top_tokens: the alternatives' token strings kept beside the top-k logprobs, by build_pool (one trace a
request and n a request) and pool import, exactly as the engine sent them; refused without keep_top_logprobs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import orjson
import pytest
import yaml

from bench.top_tokens_cost import FIXTURES, cost_of, reply_body
from tests.conftest import FIXTURE_PARAMS
from tests.sampling.test_build import make_workdir, run_build, sim_server, the_pool
from tests.store.test_framing_codec import make_sample
from tests.store.test_interchange import PROBLEMS, samples_file
from tracevote.core.config import load_params
from tracevote.core.errors import ConfigError
from tracevote.sampling.prompts import setting_messages
from tracevote.store import codec
from tracevote.store.interchange import import_file
from tracevote.store.pool import Pool, Setting

SMALL = {"eval": {"k": [1, 2]}, "report": {"k": 2}}  # two traces a problem


def wire_tokens(raw: bytes) -> list[list[str]]:
    """The alternatives' strings of a kept raw response, as the engine sent them."""
    items = orjson.loads(raw)["choices"][0]["logprobs"]["content"]
    return [[entry["token"] for entry in item["top_logprobs"]] for item in items]


def stored_payloads(pool: Pool) -> list[codec.Decoded]:
    return [codec.decode(payload) for pid in pool.problem_ids() for _, payload in pool.iter_payloads(pid)]


@pytest.mark.parametrize("per_request", [1, 2])
def test_build_pool_keeps_the_strings_the_engine_sent(tmp_path: Path, per_request: int) -> None:
    """One trace a request (ChatClient.sample) and two (`n`, sampling.choices), on vLLM's rules (n honoured)."""
    with sim_server(profile="local") as server:
        workdir = make_workdir(tmp_path, server.base_url, endpoints={"deepseek": {"profile": "local"}},
                               pool={"n_pool": 2, "keep_top_tokens": True, "keep_raw": True,
                                     "samples_per_request": per_request}, **SMALL)
        built = run_build(workdir)
    assert built.returncode == 0, built.stderr
    decoded = stored_payloads(the_pool(workdir))
    assert len(decoded) == 8
    for payload in decoded:
        sample = codec.to_sample(payload)
        assert sample.top_tokens == wire_tokens(payload.blobs["raw"].tobytes())
        assert len(sample.top_tokens) == sample.n_tokens and all(len(row) == 5 for row in sample.top_tokens)


def test_build_pool_keeps_no_strings_by_default(tmp_path: Path) -> None:
    with sim_server() as server:
        workdir = make_workdir(tmp_path, server.base_url, pool={"n_pool": 2}, **SMALL)
        built = run_build(workdir)
    assert built.returncode == 0, built.stderr
    decoded = stored_payloads(the_pool(workdir))
    assert decoded and all(codec.to_sample(d).top_tokens is None for d in decoded)
    assert all(d.blobs["top_logprobs_kmajor"].shape[0] == 5 for d in decoded)  # the top-k itself is kept


@pytest.mark.parametrize("keep", [True, False])
def test_pool_import_keeps_the_files_strings_only_when_asked(tmp_path: Path, keep: bool) -> None:
    sample = make_sample()
    rows = [[f"t{i}_{j}" for j in range(sample.top_logprobs.shape[1])] for i in range(sample.n_tokens)]
    sample = dataclasses.replace(sample, top_tokens=rows)
    setting = Setting.from_params(load_params(FIXTURE_PARAMS))
    pool = Pool.open_or_create(tmp_path / "pools", setting, simulated=False)
    pool.register(setting_messages(PROBLEMS, setting))
    import_file(samples_file(tmp_path, [sample]), pool, PROBLEMS, keep_top_logprobs=True, n_pool=None,
                keep_top_tokens=keep)
    (stored,) = pool.iter_samples(sample.problem_id)
    assert stored.top_tokens == (rows if keep else None)


def test_strings_without_the_top_k_are_refused_in_one_line(tmp_path: Path) -> None:
    params = yaml.safe_load(FIXTURE_PARAMS.read_text(encoding="utf-8"))
    params["pool"].update(keep_top_logprobs=False, keep_top_tokens=True)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    says = ("pool.keep_top_tokens: True must be false when keep_top_logprobs is false: the token strings are kept "
            "beside the top-k logprobs")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {says}")):
        load_params(path)


def test_the_cost_is_measured_on_a_recorded_engine_reply() -> None:
    """bench.top_tokens_cost, whose figures docs/pool-store.md quotes, on llama.cpp's recorded top-20 reply."""
    cost = cost_of([reply_body(FIXTURES / "llamacpp" / "chat_top20.json")], 20)
    assert cost.tokens > 0 and cost.with_strings > cost.without and cost.per_token > 0
