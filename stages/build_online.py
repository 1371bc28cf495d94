"""Stage build_online: online DeepConf run live, each trace streamed and closed as its confidence falls.

Streams only the traces its ledgers lack; stores each one as it ends; a complete run needs no key and sends nothing.
"""

import contextlib
import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

from tracevote.answers.mathverify import MathJudge
from tracevote.core.config import Params
from tracevote.core.config_endpoints import base_urls
from tracevote.core.context_fit import SOLVE_PROMPT, prompts_of
from tracevote.core.costs import simulated_as, usd
from tracevote.core.entry import stage_main
from tracevote.core.errors import TracevoteError
from tracevote.core.fileio import missing_folders
from tracevote.datasets.problems import Problem
from tracevote.deepconf.live import LiveAnswers
from tracevote.sampling import backend
from tracevote.sampling.budget import SpendCap, check_budget
from tracevote.sampling.identify import as_served
from tracevote.sampling.live import missing_traces, run_live, worst_case
from tracevote.sampling.live_rules import WARMUP, LiveRules, ledger_settings, live_rules
from tracevote.sampling.live_summary import LiveSummary
from tracevote.sampling.paid import (
    CallProgress,
    PaidStageArgs,
    RetryLines,
    check_context,
    check_free_space,
    needed_free_bytes,
    read_paid_stage_args,
)
from tracevote.sampling.probe import run_probe
from tracevote.sampling.prompts import setting_messages
from tracevote.store.live import (
    LiveLedger,
    LiveManifest,
    LiveTrace,
    ledger_root,
    open_ledger,
    write_manifest,
)
from tracevote.store.pool import Setting, prompt_digest

CAP = "online.live.max_cost_usd"


def main() -> None:
    args = read_paid_stage_args("build_online", __doc__ or "", folder="online",
                                folder_help="this dataset's live-run ledgers folder")
    params, problems = args.params, args.records
    rules = live_rules(params)
    settings = ledger_settings(params, rules)
    simulated = params.deepconf_model.backend == "sim"
    roots = {name: ledger_root(args.folder, name, setting, simulated=simulated) for name, setting in settings.items()}
    new_roots = [root for root in roots.values() if not (root / LiveLedger.META).is_file()]
    if new_roots:
        args.refuse_if_already_built()  # before anything is written, so the `dvc pull` it recommends finds it clean
    new_folders = missing_folders(args.folder)
    ledgers = {name: open_ledger(args.folder, name, setting, simulated=simulated) for name, setting in settings.items()}
    try:
        _build(args, params, problems, rules, ledgers, settings, partial=not new_roots)
    except BaseException:
        _remove_empty(new_roots, new_folders)  # a run refused or stopped before storing a trace leaves nothing
        raise


def _remove_empty(roots: list[Path], folders: list[Path]) -> None:
    """The ledgers this run created that hold no trace, then the folders made for them where left empty."""
    for root in roots:
        if root.is_dir() and not LiveLedger(root).holds_calls():
            shutil.rmtree(root, ignore_errors=True)
    for folder in folders:
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _build(args: PaidStageArgs[Problem], params: Params, problems: list[Problem], rules: LiveRules,
           ledgers: dict[str, LiveLedger], settings: dict[str, dict[str, Any]], *, partial: bool) -> None:
    """Everything after the ledgers are open: the traces missing, the run, the manifest. `partial`: every ledger
    was there before this run."""
    ledgers = dict(ledgers)
    warmup, methods = ledgers.pop(WARMUP), ledgers
    messages = setting_messages(problems, Setting.from_params(params))
    for ledger in (warmup, *methods.values()):
        ledger.register_digests({pid: prompt_digest(m) for pid, m in messages.items()}, what="prompt")
    ids = [p.id for p in problems]
    math = params.dataset(args.dataset).answer_format == "math"
    with MathJudge(max_workers=1) if math else contextlib.nullcontext() as judge:
        codes = LiveAnswers(params.answers, {p.id: p.answer for p in problems}, judge)
        missing = missing_traces(warmup, methods, ids, rules, codes)
        if missing:
            args.refuse_if_already_built(partial=partial)
            _run(params, problems, messages, rules, warmup, methods, codes, missing)
        else:
            print(f"build_online: every trace of {len(ids)} problems is stored; no request sent")
        left = missing_traces(warmup, methods, ids, rules, codes) if missing else 0
    _write_manifest(args.manifest, args.dataset, ids, rules, warmup, methods, Setting.from_params(params).record(),
                    answers=dataclasses.asdict(params.answers))
    if left:
        raise TracevoteError(f"{left} traces are still missing after retries ran out (causes above). Run the stage "
                             f"again: it streams only the missing ones.")


def _write_manifest(path: Path, dataset: str, ids: list[str], rules: LiveRules, warmup: LiveLedger,
                    methods: dict[str, LiveLedger], setting: dict[str, Any], *, answers: dict[str, Any]) -> None:
    """The manifest; `answers` are the rules the consensus check read answers by (when online.consensus is set)."""
    write_manifest(path, LiveManifest(
        dataset=dataset, warmup_ledger=os.path.relpath(warmup.root, path.parent),
        method_ledgers={name: os.path.relpath(ledger.root, path.parent) for name, ledger in methods.items()},
        problems=ids, warmup=rules.warmup, budget=rules.budget, percentiles=rules.percentiles,
        group_size=rules.group_size, consensus=rules.consensus, token=rules.token, top_k=rules.top_k,
        traces=sum(len(ledger.stored_keys(pid)) for ledger in (warmup, *methods.values()) for pid in ids
                   if ledger.log_path(pid).is_file()),
        simulated=warmup.simulated, setting=setting, answers=answers))


def _run(params: Params, problems: list[Problem], messages: dict[str, list[dict[str, str]]], rules: LiveRules,
         warmup: LiveLedger, methods: dict[str, LiveLedger], codes: LiveAnswers, missing: int) -> None:
    model, live = params.deepconf_model, params.online.live
    worst = as_served(worst_case(messages, missing, rules.max_tokens, params.deepconf_model), model)
    print(f"build_online: up to {missing} traces to stream into {warmup.root.parent}; worst case (every one to "
          f"decoding.max_tokens): {worst.render()}")
    print(f"build_online: model {model.describe()}")
    check_context(model, prompts_of(messages.items(), SOLVE_PROMPT), rules.max_tokens,
                  max_tokens_key="decoding.max_tokens", stage="build_online")
    api_key = backend.api_key_for(model, os.environ, Path(".env"), missing=missing, what="traces",
                                  stage="build_online")
    check_budget(worst, live.max_cost_usd, cap=CAP, levers="online.live.budget or decoding.max_tokens")
    check_free_space(warmup.root, needed_free_bytes(live.concurrency * len(base_urls(model.base_url)),
                                                    rules.max_tokens))
    retries = RetryLines()
    with warmup.exclusive(), backend.open_client(model, params.decoding, problems, api_key, pool=params.pool,
                                                 concurrency=live.concurrency, on_retry=retries.show) as client:
        probe_usd = 0.0
        if not warmup.holds_calls():
            report = run_probe(client)
            print(report.render())
            backend.refuse_if_uninformative(report, params.pool.allow_uninformative_logprobs)
            probe_usd = usd(report.prompt_tokens, report.completion_tokens, model.priced())
        cap = SpendCap(live.max_cost_usd, CAP, spent_usd=probe_usd)
        summary = LiveSummary(simulated_as=simulated_as(model))
        with CallProgress(missing, desc="build_online", unit="trace", retries=[client.retries]) as bar:
            retries.progress = bar

            def stored(trace: LiveTrace, done: LiveSummary) -> None:
                bar.advance(done.billed_completion, done.usd, done.simulated_as)

            try:
                run_live(client, warmup, methods, messages, rules, codes, concurrency=client.capacity,
                         pricing=model.priced(), cap=cap, summary=summary, on_stored=stored)
            finally:
                print(summary.render())
        print(backend.retry_report(client))


if __name__ == "__main__":
    stage_main(main)
