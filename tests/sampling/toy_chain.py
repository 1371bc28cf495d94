"""A toy two-step call chain on the ledger, as a process the kill tests can kill: each chain solves a
problem, then is asked to check the answer its first reply gave (so its second request depends on the
first response). Run: python -m tests.sampling.toy_chain --ledger DIR --base-url URL [--chains N]."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracevote.cli.demo import BUILTIN_PROBLEMS
from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, PricingConfig, SimConfig
from tracevote.datasets.local import read_local_rows
from tracevote.sampling.client import ChatClient
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import RunSummary, run_calls
from tracevote.store.calls import Call, CallLedger, CallRecord

N_PROBLEMS = 4
SETTING = {"method": "toy-chain", "model": "tracevote-sim", "temperature": 0.6, "max_tokens": 200}
PRICING = PricingConfig(checked="2026-07", input_cache_miss=0.14, input_cache_hit=0.0028, output=0.28,
                        expected_output_fraction=1.0)


@dataclass(frozen=True)
class SolveThenCheck:
    item_id: str
    chain: int
    problem: str

    def next_call(self, replies: Sequence[CallRecord]) -> Call | None:
        ask = {"role": "user", "content": f"{self.problem}\n\nPlease reason step by step."}
        if not replies:
            return Call(self.item_id, f"c{self.chain}/solve", "solve", [ask])
        if len(replies) == 1:
            answer = {"role": "assistant", "content": replies[0].text}
            check = {"role": "user", "content": f"Check this solution: {replies[0].text[-200:]}"}
            return Call(self.item_id, f"c{self.chain}/check", "solve", [ask, answer, check])
        return None


def problems() -> list[tuple[str, str]]:
    rows = read_local_rows(BUILTIN_PROBLEMS)[:N_PROBLEMS]
    return [(f"toy-{i:02d}", row["problem"]) for i, row in enumerate(rows, start=1)]


def chains(n_chains: int) -> list[SolveThenCheck]:
    return [SolveThenCheck(item_id, chain, text) for chain in range(n_chains) for item_id, text in problems()]


def client_for(base_url: str) -> ChatClient:
    model = ModelConfig(backend="openai", base_url=base_url, name="tracevote-sim", extra_body={},
                        api_key_env="NO_KEY", needs_key=False, sim=SimConfig(0, 1.0, 0.45, 150))
    decoding = DecodingConfig(temperature=0.6, top_p=None, max_tokens=200, top_logprobs=0)
    return ChatClient(model, decoding, api_key=None, timeout_s=60, max_retries=4)


def run(ledger_root: Path, base_url: str, n_chains: int, concurrency: int = 4) -> RunSummary:
    ledger = CallLedger.open_at(ledger_root, SETTING, simulated=True)
    with client_for(base_url) as client:
        return run_calls(ledger, chains(n_chains), lambda call: paid_reply(client, call, PRICING),
                         concurrency=concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ledger", required=True, type=Path)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args()
    print(run(args.ledger, args.base_url, args.chains).render())


if __name__ == "__main__":
    main()
