"""The simulator's server counts a handler's error (a client gone mid-reply is expected) instead of printing it."""

from __future__ import annotations

import pytest

from tracevote.core.config_endpoints import SimConfig
from tracevote.sim.faults import FaultPlan
from tracevote.sim.model import SimModel
from tracevote.sim.server import ServerOptions, SimServer


@pytest.mark.parametrize(("error", "counted"), [(ConnectionResetError("reset by peer"), "client gone"),
                                                (ValueError("bad"), "handler error ValueError: bad")])
def test_a_handler_error_is_counted_and_logged_not_printed(error: Exception, counted: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    logged: list[str] = []
    model = SimModel(SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60))
    server = SimServer(("127.0.0.1", 0), model, FaultPlan(), ServerOptions(), log=logged.append)
    try:
        try:
            raise error
        except Exception:
            server.handle_error(None, ("127.0.0.1", 1))  # as socketserver calls it, inside the except
    finally:
        server.server_close()
    assert server.stats.snapshot()["outcomes"] == {counted: 1}
    assert logged == [f"('127.0.0.1', 1): {counted}"]
    assert capsys.readouterr().err == ""
