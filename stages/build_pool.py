"""Stage build_pool: sample the traces the pool lacks, from DeepSeek, an OpenAI-compatible server or the simulator.

Requests only missing samples; stores each one as it arrives; a complete pool needs no key and sends nothing.
"""

import argparse
import os
from pathlib import Path

from tqdm import tqdm

from tracevote import backend
from tracevote.budget import check_budget
from tracevote.build import BuildPlan, BuildSummary, plan_build, run_build
from tracevote.config import Params, load_params
from tracevote.datasets import Problem, load_problems
from tracevote.entry import stage_main
from tracevote.errors import TracevoteError
from tracevote.pool import Pool, Setting, find_pool, write_manifest
from tracevote.records import Sample

REBUILD_ENV = "TRACEVOTE_REBUILD"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--problems", required=True)
    parser.add_argument("--pools", required=True, type=Path, help="this dataset's pools folder")
    parser.add_argument("--manifest", required=True, type=Path)
    args = parser.parse_args()
    params = load_params(args.params)
    problems = load_problems(args.problems)
    setting = Setting.from_params(params)
    ids = [p.id for p in problems]
    existing = find_pool(args.pools, setting)
    if existing is None or existing.missing(ids, params.pool.n_pool):
        # before anything is written, so the `dvc pull` this recommends finds a clean checkout
        backend.refuse_if_already_built(Path("dvc.lock"), args.params, rebuild=os.environ.get(REBUILD_ENV) == "1")
    pool = Pool.open_or_create(args.pools, setting, simulated=params.model.backend == "sim")
    pool.register(problems)
    plan = plan_build(pool, problems, setting, params.pool.n_pool, params.pool.pricing)
    if plan.n_requests == 0:
        write_manifest(args.manifest, pool, params.dataset.name, params.pool.n_pool, ids)
        print(f"build_pool: {pool.root} already holds {params.pool.n_pool} samples for each of "
              f"{len(problems)} problems; no request sent")
        return

    print(f"build_pool: {plan.n_requests} samples missing in {pool.root}; estimate: {plan.cost.render()}")
    api_key = backend.api_key_for(params.model, os.environ, Path(".env"), missing=plan.n_requests)
    check_budget(plan.cost, params.pool.max_cost_usd)
    with backend.open_sampler(params, problems, api_key) as sampler:
        report = sampler.probe()
        print(report.render())
        backend.refuse_if_uninformative(report, params.pool.allow_uninformative_logprobs)
        if report.simulated and not pool.simulated:
            pool.mark_simulated()
        summary = _run_with_progress(pool, problems, plan, sampler, params)
        print(sampler.retry_report())
    manifest = write_manifest(args.manifest, pool, params.dataset.name, params.pool.n_pool, ids)
    print(summary.render())
    missing = params.pool.n_pool * len(problems) - manifest.samples
    if missing:
        raise TracevoteError(f"{missing} samples are still missing after retries ran out (causes above). "
                             f"Run the stage again: it requests only the missing ones.")


def _run_with_progress(pool: Pool, problems: list[Problem], plan: BuildPlan, sampler: backend.Sampler,
                       params: Params) -> BuildSummary:
    with tqdm(total=plan.n_requests, unit="sample", desc="build_pool", dynamic_ncols=True,
              mininterval=1.0) as bar:
        def on_sample(sample: Sample, summary: BuildSummary) -> None:
            bar.update(1)
            bar.set_postfix(tokens=summary.completion_tokens, usd=f"{summary.usd:.2f}", refresh=False)

        return run_build(pool, problems, plan, sampler.sample, concurrency=params.pool.concurrency,
                         pricing=params.pool.pricing, on_sample=on_sample)


if __name__ == "__main__":
    stage_main(main)
