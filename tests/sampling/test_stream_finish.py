"""Whether a stream the observer stopped had already brought the server's finish_reason: read before the stop,
or among the bytes that had arrived when it came (then that stop saved the server nothing)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.sampling.test_stream import provider_stream
from tests.sse_server import events
from tracevote.sampling.stream import read_stream


@pytest.mark.parametrize(("pieces", "batch_chunks", "server_finished"), [
    # the whole stream in one read: its finish_reason arrived with the stopping tokens, after them, left unread
    (lambda sse: [sse], 1000, True),
    (events, 1000, True),  # an event a read, every token held back: the finish came before the batch went over
    (events, 1, False),  # an event a read, each handed over: the stop came with the first token, long before
], ids=["one-read", "held-back", "stopped-first"])
def test_a_stop_says_whether_the_servers_finish_had_arrived(pieces: Callable[[bytes], list[bytes]],
                                                             batch_chunks: int, server_finished: bool) -> None:
    stopped = read_stream(pieces(provider_stream("deepseek")), top_logprobs=20, batch_chunks=batch_chunks,
                          observer=lambda batch: "stop")
    assert (stopped.stop_reason, stopped.finish_reason, stopped.server_finished) == ("confidence", None,
                                                                                      server_finished)
    whole = read_stream(events(provider_stream("deepseek")), top_logprobs=20)
    assert (whole.finish_reason, whole.server_finished) == ("stop", True)
