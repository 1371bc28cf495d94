"""The pool's setting: what keys a pool's folder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tracevote.store.ledger import fingerprint_of
from tracevote.store.pool import Pool, Setting

SETTING = Setting(backend="openai", model="tinymath", extra_body="{}", sim=None, system=None,
                  template="{problem}", temperature=0.6, top_p=None, max_tokens=128, top_logprobs=20, seed=0)


def test_a_seed_names_a_new_pool_and_no_seed_keeps_the_folder_pools_had_before_it(tmp_path: Path) -> None:
    """decoding.seed changes what is generated, so it keys the pool; unset, the fingerprint is the one a pool
    written before the setting existed has (its pool.json holds no seed), so that pool still opens."""
    unseeded = dataclasses.replace(SETTING, seed=None)
    before = {name: value for name, value in dataclasses.asdict(unseeded).items()
              if name not in ("seed", "reasoning_effort")}  # neither existed then
    assert unseeded.fingerprint == fingerprint_of(before)
    assert dataclasses.replace(SETTING, seed=3).fingerprint not in {unseeded.fingerprint,
                                                                    dataclasses.replace(SETTING, seed=4).fingerprint}
    # the endpoint's reasoning effort, likewise: set, a new pool; each effort its own
    assert dataclasses.replace(unseeded, reasoning_effort="high").fingerprint not in {
        unseeded.fingerprint, dataclasses.replace(unseeded, reasoning_effort="low").fingerprint}
    old = Pool.open_at(tmp_path / unseeded.folder_name, before, simulated=False)
    assert Pool.open_or_create(tmp_path, unseeded, simulated=False).root == old.root
