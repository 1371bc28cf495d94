"""Stage grade: grade one run of grading.runs (offline): Math-Verify accuracy against its dataset's gold, the
reasoning's word count, and the critic's stored scores, into grading/runs/<run>.json and one line per graded
prediction in grading/runs/<run>.jsonl."""

import argparse
from pathlib import Path

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import check_output_folders
from tracevote.grading.critic import structured_replies
from tracevote.grading.runs import grade_inputs, run_config, run_inputs, run_record, write_run
from tracevote.grading.stored import stored_critic_scores
from tracevote.grading.summary import render_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--run", required=True, help="a key of grading.runs")
    parser.add_argument("--gold", required=True, type=Path, help="the run's dataset, normalized")
    parser.add_argument("--critic", required=True, type=Path, help="the run's critic folder")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--details", required=True, type=Path, help="one JSON line per graded prediction")
    args = parser.parse_args()
    params = load_params(args.params)
    check_output_folders(args.out.parent, args.details.parent)
    run = run_config(params.grading.runs, args.run)
    inputs = run_inputs(run, args.gold, params.answers)
    critic, critic_simulated = stored_critic_scores(params, inputs.pairing(), args.critic,
                                                    structured=structured_replies(params))
    grades = grade_inputs(inputs, params.grading)
    record = run_record(run, inputs, grades, critic, critic_simulated, params.critic_model.name)
    write_run(args.out, args.details, record, grades, critic)
    print(render_run(record, critic_enabled=params.grading.critic.enabled))


if __name__ == "__main__":
    stage_main(main)
