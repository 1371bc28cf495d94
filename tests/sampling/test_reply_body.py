"""The client reads a whole (non-streamed) reply in pieces of BODY_PIECE_BYTES: a reply longer than one piece
arrives byte for byte, and the connection it came on serves the next request."""

from __future__ import annotations

import dataclasses

import requests

from tests.sampling.test_client import DECODING, messages, model_config
from tracevote.core.config_endpoints import SimConfig
from tracevote.sampling.client import BODY_PIECE_BYTES, ChatClient
from tracevote.sim.model import SimModel
from tracevote.sim.server import running_server

LONG = SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=1600)  # ~1.8 MB a reply at top-20


def test_a_reply_longer_than_one_piece_arrives_whole_on_one_kept_connection() -> None:
    decoding = dataclasses.replace(DECODING, max_tokens=8192)
    with running_server(SimModel(LONG)) as url:
        client = ChatClient(model_config(url), decoding, api_key=None, timeout_s=30.0, max_retries=0)
        with client:
            raws = [client.sample_with_body(messages(), problem_id="p", sample_id=i, keep_top_logprobs=True)[1]
                    for i in range(2)]
            request = client.request_body(messages())
        connections = requests.get(url + "/_stats", timeout=5).json()["connections"]
    expected = [SimModel(LONG).complete_bytes(request, f"p/{i}") for i in range(2)]
    assert min(len(body) for body in expected) > BODY_PIECE_BYTES  # so each reply took more than one piece
    assert [raw.body for raw in raws] == expected
    assert connections == 1 + 1  # the client's one connection, kept for both; the stats request's own
