"""run_live counts the traces still missing on its own state as it returns: the count build_online reports, the
same a rerun reads back from the ledgers (so the stage need not decode every stored trace again)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.sampling.test_live import CODES, GOLDS, MESSAGES, PRICING, SIM, client_for, ledgers, problem_text, rules
from tracevote.sampling.live import missing_traces, run_live
from tracevote.sim.model import SimModel
from tracevote.sim.server import SimServer, start_server, stop_server


@pytest.fixture(scope="module")
def sim_server() -> Iterator[SimServer]:
    server = start_server(SimModel(SIM, answers={problem_text(pid): gold for pid, gold in GOLDS.items()}))
    try:
        yield server
    finally:
        stop_server(server)


def test_the_runs_own_count_of_missing_traces_is_the_one_read_back_from_its_ledgers(
        tmp_path: Path, sim_server: SimServer) -> None:
    """Under the consensus stop, at a concurrency that starts traces before the check that ends sampling."""
    live = replace(rules(budget=16, consensus=0.7), percentiles={"high": 10.0})
    warmup, methods = ledgers(tmp_path, live)
    before = missing_traces(warmup, methods, list(GOLDS), live, CODES)
    with client_for(sim_server, 4) as client:
        summary = run_live(client, warmup, methods, MESSAGES, live, CODES, concurrency=4, pricing=PRICING)
    assert before == len(GOLDS) * live.budget  # nothing stored yet: every trace up to the budget may start
    assert summary.stored > 0 and summary.missing == 0
    assert summary.missing == missing_traces(warmup, methods, list(GOLDS), live, CODES)
