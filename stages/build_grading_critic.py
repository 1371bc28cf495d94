"""Stage build_grading_critic: ask the grading critic (grading.critic) about a run's predictions, when it is
enabled: the first grading.critic.max_samples gold items with a reference solution and a prediction.

Every reply is stored the moment it arrives; a rerun requests only the missing ones; a finished run needs no key
and sends nothing. Disabled, it sends nothing and records that in the manifest the grade stage reads.
"""

import argparse
import os
from pathlib import Path

from tracevote.core.config import check_params
from tracevote.core.entry import stage_main
from tracevote.grading.critic import structured_replies
from tracevote.grading.runs import run_config, run_inputs
from tracevote.grading.stored import record_disabled_critic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--run", required=True, help="a key of grading.runs")
    parser.add_argument("--gold", required=True, type=Path, help="the run's dataset, normalized")
    parser.add_argument("--critic", required=True, type=Path, help="the run's critic folder (ledger and manifest)")
    args = parser.parse_args()
    params = check_params(args.params)  # the whole file, as the check_params stage: this stage pays
    run = run_config(params.grading.runs, args.run)
    stage = f"build_grading_critic@{run.name}"
    if not params.grading.critic.enabled:  # before the predictions are read: a pool's text is large
        record_disabled_critic(params, run.name, args.critic, stage=stage)
        return
    # here, not at the top: the critic is off by default, and then no HTTP client, simulator or pool store loads
    from tracevote.grading.build import build_critic
    from tracevote.sampling.paid import REBUILD_ENV, refuse_if_already_built

    inputs = run_inputs(run, args.gold, params.answers)
    build_critic(params, run.name, inputs.pairing(), args.critic, stage=stage,
                 refuse_if_already_built=lambda partial: refuse_if_already_built(
                     Path("dvc.lock"), args.params, stage=stage, rebuild=os.environ.get(REBUILD_ENV) == "1",
                     partial=partial), structured=structured_replies(params))


if __name__ == "__main__":
    stage_main(main)
