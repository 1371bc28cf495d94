"""Stage build_critiques: sample the critiques a step-labelled dataset lacks (ProcessBench's prompt in the dataset's
template, critique.n_votes per solution), on DeepSeek, an OpenAI-compatible server or the simulator.

Every critique is stored the moment it arrives; a rerun requests only the missing ones; a finished dataset needs
no key and sends nothing.
"""

import os
from pathlib import Path

from tracevote.core.costs import simulated_as
from tracevote.core.entry import stage_main
from tracevote.core.errors import TracevoteError
from tracevote.critique import build
from tracevote.critique.prompts import steps_digest
from tracevote.datasets.steps import load_step_records
from tracevote.sampling import backend
from tracevote.sampling.budget import SpendCap, check_budget
from tracevote.sampling.identify import as_served
from tracevote.sampling.paid import call_prompts, check_context, read_paid_stage_args, run_ledger_calls
from tracevote.sampling.runner import OneCall
from tracevote.store.calls import CallLedger


def main() -> None:
    args = read_paid_stage_args("build_critiques", __doc__ or "", folder="critiques",
                                folder_help="this dataset's critiques folder", records="steps", load=load_step_records)
    params, records, stage, cfg = args.params, args.records, args.stage, args.params.critique
    existed = (build.ledger_root(args.folder, params, args.dataset) / CallLedger.META).is_file()
    if not existed:
        # before anything is written, so the `dvc pull` it recommends finds a clean checkout
        args.refuse_if_already_built()
    ledger = build.open_ledger(args.folder, params, args.dataset, records)
    calls = build.critique_calls(records, build.dataset_template(params, args.dataset), cfg.n_votes)
    model = params.critique_model
    plan = build.plan_critiques(ledger, calls, model.priced(), cfg.max_tokens, simulated_as=simulated_as(model))
    if not plan.missing:
        build.write_manifest(args.manifest, ledger, args.dataset, records, cfg.n_votes)
        print(f"build_critiques: {ledger.root} holds all {len(calls)} critiques; no request sent")
        return
    if existed:
        args.refuse_if_already_built(partial=True)

    print(f"build_critiques: {len(plan.missing)} of {len(calls)} critiques missing in {ledger.root}; "
          f"estimate {as_served(plan.cost, model).render()}")
    print(f"build_critiques: model {model.describe()}")
    check_context(model, call_prompts(plan.missing, "critique"), cfg.max_tokens, max_tokens_key="critique.max_tokens",
                  stage=stage)
    api_key = backend.api_key_for(model, os.environ, Path(".env"), missing=len(plan.missing),
                                  what="critiques", stage=stage)
    check_budget(plan.cost, cfg.max_cost_usd, cap="critique.max_cost_usd",
                 levers="critique.max_tokens, critique.n_votes or critique.datasets")
    summary = run_ledger_calls(ledger, [OneCall(call) for call in plan.missing], model=model, pool=params.pool,
                               stage=stage, decoding=build.critique_decoding(cfg), api_keys={model.endpoint: api_key},
                               concurrency=cfg.concurrency,
                               total=len(plan.missing), unit="critique",
                               first_errors={steps_digest(record.steps): record.label for record in records},
                               cap=SpendCap(cfg.max_cost_usd, "critique.max_cost_usd"), settings="critique")
    manifest = build.write_manifest(args.manifest, ledger, args.dataset, records, cfg.n_votes)
    print(summary.render())
    if manifest.finished < len(records):
        raise TracevoteError(f"{len(records) - manifest.finished} solutions lack critiques after retries ran out "
                             f"(causes above). Run the stage again: it requests only the missing ones.")


if __name__ == "__main__":
    stage_main(main)
