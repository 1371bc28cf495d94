"""Running the grading critic on the ledger: what is missing, the guard, the key, the budget, the calls, and
the manifest the grade stage reads. Used by the build_grading_critic stage and by `python -m tracevote grade`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tracevote.answers.mathverify import normalize_answer_text
from tracevote.core.config import Params
from tracevote.core.errors import TracevoteError
from tracevote.critique.critic_prompt import reasoning_digest
from tracevote.grading.accuracy import Pairing, final_answer
from tracevote.grading.critic import (
    calls_cost,
    critic_decoding,
    critic_items,
    ledger_root,
    missing_calls,
    open_ledger,
    register_items,
)
from tracevote.grading.runs import CriticManifest, write_critic_manifest
from tracevote.sampling import backend
from tracevote.sampling.budget import SpendCap, check_budget
from tracevote.sampling.identify import as_served
from tracevote.sampling.paid import call_prompts, check_context, run_ledger_calls
from tracevote.sampling.runner import OneCall
from tracevote.store.calls import CallLedger


def build_critic(params: Params, run: str, pairing: Pairing, critic_dir: Path, *, stage: str,
                 refuse_if_already_built: Callable[[bool], None] = lambda partial: None,
                 structured: bool = False, record_manifest: bool = True) -> CriticManifest:
    """Ask the critic about every item `grading.critic` selects that the ledger lacks, then write the manifest
    (unless not `record_manifest`: the command line sharing a pipeline run's folder leaves the run's manifest as
    the stage wrote it). `refuse_if_already_built(partial)` is the stage's fresh-clone guard, run before anything
    would be paid; `partial` says the ledger is on disk but lacks calls. `structured`: ask for the JSON-schema reply
    (tracevote.grading.critic.RESPONSE_FORMAT), into a ledger of its own."""
    cfg = params.grading.critic
    items = critic_items(pairing, cfg.max_samples)
    existed = (ledger_root(critic_dir, params, structured=structured) / CallLedger.META).is_file()
    if not existed:
        refuse_if_already_built(False)  # before anything is written: the `dvc pull` it recommends finds a clean folder
    ledger = open_ledger(critic_dir, params, structured=structured)
    register_items(ledger, items)  # also for a ledger built before items were registered
    missing = missing_calls(ledger, items, structured=structured)
    if not items:
        print(f"{stage}: the critic has nothing to score in run {run}: none of its predictions is of a gold item "
              "with a reference solution (a `solution` field, or a GSM8K-style worked answer before ####), which "
              "the critic reads; no request sent, and the run's critic score stays empty")
        return _write_manifest(critic_dir, run, ledger, 0, 0, cfg.max_samples, record_manifest)
    if not missing:
        print(f"{stage}: {ledger.root} holds all {len(items)} critic replies; no request sent")
        return _write_manifest(critic_dir, run, ledger, len(items), len(items), cfg.max_samples,
                               record_manifest)
    if existed:
        refuse_if_already_built(True)
    cost = calls_cost(missing, params)
    model = params.critic_model
    print(f"{stage}: {len(missing)} of {len(items)} critic replies missing in {ledger.root}; estimate "
          f"{as_served(cost, model).render()}")
    print(f"{stage}: model {model.describe()}")
    check_context(model, call_prompts(missing, "critic call"), critic_decoding(params).max_tokens,
                  max_tokens_key="grading.critic.max_tokens", stage=stage)
    api_key = backend.api_key_for(model, os.environ, Path(".env"), missing=len(missing),
                                  what="critic calls", stage=stage)
    check_budget(cost, cfg.max_cost_usd, cap="grading.critic.max_cost_usd",
                 levers="grading.critic.max_samples or grading.critic.max_tokens")
    reached = reached_gold(pairing) if model.backend == "sim" else None
    summary = run_ledger_calls(ledger, [OneCall(call) for call in missing], model=model, pool=params.pool,
                               stage=stage, decoding=critic_decoding(params), api_keys={model.endpoint: api_key},
                               concurrency=cfg.concurrency, total=len(missing), unit="critic call", reached=reached,
                               cap=SpendCap(cfg.max_cost_usd, "grading.critic.max_cost_usd"), settings="grading.critic")
    print(summary.render())
    stored = len(items) - len(missing_calls(CallLedger(ledger.root), items, structured=structured))
    manifest = _write_manifest(critic_dir, run, ledger, len(items), stored, cfg.max_samples, record_manifest)
    if stored < len(items):
        raise TracevoteError(f"{len(items) - stored} critic replies are missing after retries ran out (causes "
                             f"above). Run again: it requests only the missing ones.")
    return manifest


def reached_gold(pairing: Pairing) -> dict[str, bool]:
    """For the simulated critic only, by reasoning digest: whether the prediction's final answer reads as its gold
    (a normalised string comparison, no Math-Verify: enough to make the simulated scores track correctness)."""
    return {reasoning_digest(prediction.thinking): normalize_answer_text(final_answer(prediction.content)).lower()
            == normalize_answer_text(item.answer).lower() for item, prediction in pairing.pairs}


def _write_manifest(critic_dir: Path, run: str, ledger: CallLedger, items: int, finished: int,
                    max_samples: int, record: bool = True) -> CriticManifest:
    ledger = CallLedger(ledger.root)  # read afresh: the simulator may have marked it since it was opened
    manifest = CriticManifest(run, True, str(ledger.root.relative_to(critic_dir)), ledger.fingerprint, items,
                              finished, ledger.simulated, max_samples)
    if record:
        write_critic_manifest(critic_dir, manifest)
    return manifest
