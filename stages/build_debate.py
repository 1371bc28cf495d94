"""Stage build_debate: run the DyLAN-style debates a dataset lacks, on DeepSeek, an OpenAI-compatible server or
the simulator.

Every call is stored the moment it arrives; a rerun replays each debate from the ledger and pays only from
its first missing call on; finished debates need no key and send nothing.
"""

import os
from pathlib import Path

from tracevote.core.costs import simulated_as
from tracevote.core.entry import stage_main
from tracevote.core.errors import TracevoteError
from tracevote.debate import build
from tracevote.debate.context import prompts_by_endpoint
from tracevote.debate.protocol import DebateConversation
from tracevote.sampling import backend
from tracevote.sampling.budget import SpendCap, check_budget
from tracevote.sampling.identify import as_served
from tracevote.sampling.paid import check_context, read_paid_stage_args, run_ledger_calls
from tracevote.store.calls import CallLedger


def main() -> None:
    args = read_paid_stage_args("build_debate", __doc__ or "", folder="debates",
                                folder_help="this dataset's debates folder")
    params, stage = args.params, args.stage
    selection = build.select_problems(args.records, params.debate.problems, args.dataset)
    problems = [args.records[position] for position in selection.positions]
    existed = (build.ledger_root(args.folder, params) / CallLedger.META).is_file()
    if not existed:
        # before anything is written, so the `dvc pull` it recommends finds a clean checkout
        args.refuse_if_already_built()
    ledger = build.open_ledger(args.folder, params, problems)
    debates = build.debates_for(problems, params)
    model, judge = params.debate_model, params.judge_model
    plan = build.plan_debates(ledger, debates, model.priced(), judge_pricing=judge.priced(),
                              simulated_as=simulated_as(model))
    if not plan.unfinished:
        build.write_manifest(args.manifest, ledger, args.dataset, debates, selection)
        print(f"build_debate: {ledger.root} holds all {len(debates)} debates{_range(selection)}; no request sent")
        return
    if existed:
        args.refuse_if_already_built(partial=True)

    print(f"build_debate: {len(plan.unfinished)} of {len(debates)} debates{_range(selection)} unfinished in "
          f"{ledger.root} "
          f"({plan.stored_calls} calls stored); estimate for at most {as_served(plan.cost, model, judge).render()}")
    print(f"build_debate: agents on {model.describe()}; judge on {judge.describe()}")
    for each, prompts in prompts_by_endpoint(plan.unfinished, model, judge):
        check_context(each, prompts, params.debate.max_tokens, max_tokens_key="debate.max_tokens", stage=stage)
    api_keys = {each.endpoint: backend.api_key_for(each, os.environ, Path(".env"), missing=len(plan.unfinished),
                                                   what="debates", stage=stage) for each in (model, judge)}
    check_budget(plan.cost, params.debate.max_cost_usd, cap="debate.max_cost_usd",
                 levers="debate.max_tokens, debate.agents or debate.datasets")
    summary = run_ledger_calls(ledger, [DebateConversation(debate) for debate in plan.unfinished], model=model,
                               routes=build.judge_routes(params), pool=params.pool, stage=stage,
                               decoding=build.debate_decoding(params.debate), api_keys=api_keys,
                               concurrency=params.debate.concurrency, total=plan.cost.requests, unit="call",
                               problems=problems, cap=SpendCap(params.debate.max_cost_usd, "debate.max_cost_usd"),
                               settings="debate")
    manifest = build.write_manifest(args.manifest, ledger, args.dataset, debates, selection)
    print(summary.render())
    if manifest.finished < len(debates):
        raise TracevoteError(f"{len(debates) - manifest.finished} debates are unfinished after retries ran "
                             f"out (causes above). Run the stage again: it requests only the missing calls.")


def _range(selection: build.Selection) -> str:
    if selection.span is None:
        return ""
    return (f" (debate.problems {list(selection.span)}: positions {selection.positions[0]}-{selection.positions[-1]} "
            f"of {selection.dataset_problems})")


if __name__ == "__main__":
    stage_main(main)
