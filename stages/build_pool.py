"""Stage build_pool: sample the traces the pool lacks, from DeepSeek, an OpenAI-compatible server or the simulator.

Requests only missing samples; stores each one as it arrives; a complete pool needs no key and sends nothing.
As stage build_pool_model, `--endpoint` names one of deepconf.endpoints, the other models of the study: its pool,
priced and simulated as that endpoint, under study/<endpoint>/.
"""

import os
import shutil
import sys
from pathlib import Path

from tracevote.core.config import Params
from tracevote.core.config_endpoints import ModelConfig, base_urls
from tracevote.core.context_fit import SOLVE_PROMPT, prompts_of
from tracevote.core.costs import simulated_as, usd
from tracevote.core.entry import stage_main
from tracevote.core.errors import TracevoteError
from tracevote.core.fileio import missing_folders
from tracevote.core.study_paths import POOL_STAGE
from tracevote.datasets.problems import Problem
from tracevote.sampling import backend
from tracevote.sampling.budget import SpendCap, check_budget
from tracevote.sampling.build import BuildPlan, plan_build, run_build
from tracevote.sampling.identify import as_served
from tracevote.sampling.paid import (
    CallProgress,
    PaidStageArgs,
    RetryLines,
    check_context,
    check_free_space,
    needed_free_bytes,
    read_paid_stage_args,
)
from tracevote.sampling.prompts import setting_messages
from tracevote.sampling.runner import RunSummary
from tracevote.store.pool import Pool, Setting, find_pool, write_manifest


def main() -> None:
    args = read_paid_stage_args("build_pool", __doc__ or "", folder="pools",
                                folder_help="this dataset's pools folder", study_group=POOL_STAGE)
    params, problems = args.params, args.records
    model = pool_model(args)
    setting = Setting.from_params(params, model)
    ids = [p.id for p in problems]
    existing = find_pool(args.folder, setting)
    if existing is None or existing.missing_samples(ids, params.pool.n_pool):
        # before anything is written, so the `dvc pull` it recommends finds a clean checkout
        args.refuse_if_already_built(partial=existing is not None)
    new_folders = missing_folders(pool_root := args.folder / setting.folder_name)
    pool = Pool.open_or_create(args.folder, setting, simulated=model.backend == "sim")
    with pool.exclusive():  # before the probe: a second build of this pool pays for nothing (and removes nothing)
        try:
            _build(args, pool, setting, model)
        except BaseException:
            if existing is None and not pool.holds_calls():  # a first build that stored nothing leaves no empty pool
                shutil.rmtree(pool_root, ignore_errors=True)
                for folder in new_folders[1:]:  # then the folders made for it, innermost first, where left empty
                    if folder.is_dir() and not any(folder.iterdir()):
                        folder.rmdir()
            raise


def pool_model(args: PaidStageArgs[Problem]) -> ModelConfig:
    """The model this pool is of: deepconf.endpoint's, or `--endpoint`'s (one of deepconf.endpoints)."""
    return args.params.deepconf_model if args.endpoint is None else args.params.study_model(args.endpoint)


def _build(args: PaidStageArgs[Problem], pool: Pool, setting: Setting, model: ModelConfig) -> None:
    """Everything after the pool is open: the plan, the key, the budget, the probe, the run, the manifest."""
    params, problems = args.params, args.records
    ids = [p.id for p in problems]
    pool.register(setting_messages(problems, setting))
    plan = plan_build(pool, problems, setting, params.pool.n_pool, model.priced(), simulated_as=simulated_as(model))
    if plan.n_requests == 0:
        _write_blocks(pool, ids)  # a pool built before blocks existed, or whose last build was cut short
        write_manifest(args.manifest, pool, args.dataset, params.pool.n_pool, ids)
        print(f"build_pool: {pool.root} already holds {params.pool.n_pool} samples for each of "
              f"{len(problems)} problems; no request sent")
        return

    opening = as_served(plan.cost, model)
    print(f"build_pool: {plan.n_requests} samples missing in {pool.root}; estimate: {opening.render()}")
    print(f"build_pool: model {model.describe()}")
    messages = setting_messages(problems, setting)
    check_context(model, prompts_of(((pid, messages[pid]) for pid in plan.missing), SOLVE_PROMPT),
                  params.decoding.max_tokens, max_tokens_key="decoding.max_tokens", stage=args.stage)
    api_key = backend.api_key_for(model, os.environ, Path(".env"), missing=plan.n_requests,
                                  stage=args.stage.split("@")[0])  # build_pool, or build_pool_model
    check_budget(plan.cost, params.pool.max_cost_usd)
    check_free_space(pool.root, needed_free_bytes(params.pool.concurrency * len(base_urls(model.base_url)),
                                                  params.decoding.max_tokens, params.decoding.top_logprobs))
    from tracevote.sampling.probe import samples_per_request  # here: the HTTP client loads once samples are sent

    retries = RetryLines()
    probe_usd = 0.0
    with backend.open_sampler(params, problems, api_key, on_retry=retries.show, model=model) as sampler:
        if plan.n_requests < params.pool.n_pool * len(problems):
            # this pool holds samples, so it passed the probe when they were built; the first sample goes alone
            # instead, and the pool judges the server's kind from it before another is paid for
            print(f"build_pool: {pool.root} already holds samples; the probe it passed is not sent again")
        else:
            report = sampler.probe()
            print(report.render())
            backend.refuse_if_uninformative(report, params.pool.allow_uninformative_logprobs)
            pool.check_kind(report.simulated)  # before any sample is paid for: a pool never mixes real and simulated
            probe_usd = usd(report.prompt_tokens, report.completion_tokens, model.priced())
        per_request, n_probe = samples_per_request(sampler.client, params.pool.samples_per_request,
                                                   lambda line: print(f"build_pool: {line}", file=sys.stderr))
        if n_probe is not None:
            probe_usd += usd(n_probe.prompt_tokens, n_probe.completion_tokens, model.priced())
        cap = SpendCap(params.pool.max_cost_usd, "pool.max_cost_usd", spent_usd=probe_usd)  # the probe counts too
        summary = _run_with_progress(pool, problems, plan, sampler, params, model, cap, retries,
                                     first_alone=plan.n_requests < params.pool.n_pool * len(problems),
                                     per_request=per_request)
        print(sampler.retry_report())
    _write_blocks(pool, ids)
    manifest = write_manifest(args.manifest, pool, args.dataset, params.pool.n_pool, ids)
    print(summary.render())
    missing = params.pool.n_pool * len(problems) - manifest.samples
    if missing:
        raise TracevoteError(f"{missing} samples are still missing after retries ran out (causes above). "
                             f"Run the stage again: it requests only the missing ones.")


def _write_blocks(pool: Pool, ids: list[str]) -> None:
    """Each finished log's confidence block (where missing or stale): the score stage reads a problem in one call."""
    written = pool.write_confidence_blocks(ids)
    if written:
        print(f"build_pool: wrote the confidence blocks of {written} problems")


def _run_with_progress(pool: Pool, problems: list[Problem], plan: BuildPlan, sampler: backend.Sampler,
                       params: Params, model: ModelConfig, cap: SpendCap, retries: RetryLines, *,
                       first_alone: bool, per_request: int) -> RunSummary:
    with CallProgress(plan.n_requests, desc="build_pool", unit="sample", retries=[sampler.client.retries]) as bar:
        retries.progress = bar  # from here the progress bar counts retries and says why it waits
        return run_build(pool, problems, plan, sampler.sample, concurrency=sampler.client.capacity,
                         pricing=model.priced(), max_tokens=params.decoding.max_tokens,
                         cap=cap, first_alone=first_alone,
                         on_sample=bar.on_stored, per_request=per_request, sample_many=sampler.sample_many)


if __name__ == "__main__":
    stage_main(main)
