"""Stage study@<dataset>: every DeepConf model of the dataset (deepconf.endpoint and each of deepconf.endpoints) in
one table of method x K with accuracy, interval, tokens and dollars per problem, the frontier of the cheapest way to
each accuracy, each model against study.reference on the same problems, and accuracy against dollars (a PNG); the
debate joins with study.debate. Reads each model's aggregate, score table and pool manifest (core.study_paths)."""

import argparse
from pathlib import Path

from tracevote.core.config import Params, load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import write_json, write_text
from tracevote.core.study_paths import model_paths
from tracevote.deepconf.study import ModelRun, paired_differences, run_points
from tracevote.report import study
from tracevote.report.plots import dvc_plot_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--metrics", required=True, type=Path, help="folder for study.md, study.csv, study.json")
    parser.add_argument("--headline", required=True, type=Path, help="folder for <model>/<method>.json")
    parser.add_argument("--plots", required=True, type=Path, help="folder for accuracy_vs_usd.png")
    parser.add_argument("--debate-results", required=True, type=Path, help="study.debate_watch")
    args = parser.parse_args()
    params = load_params(args.params)
    runs = [load(params, endpoint, args.dataset) for endpoint in params.study_models()]
    ks = params.study.k or runs[0].result.k
    points = [point for run in runs for point in run_points(run, ks)]
    notes = [study.CRITIQUE_NOTE]
    simulated = any(run.simulated for run in runs)
    ev = params.eval
    if params.study.debate:
        cfg = params.debate
        debate = study.join_debate(study.read_debate(args.debate_results), args.dataset, cfg.datasets, cfg.endpoint,
                                   cfg.judge_endpoint, cfg.agents, resamples=ev.bootstrap, seed=ev.seed,
                                   level=ev.ci_level)
        points += [debate.point] if debate.point is not None else []
        notes.insert(0, debate.note)
        simulated |= debate.simulated
    reference = params.study.reference or params.deepconf.endpoint
    differences = study.difference_table(paired_differences(runs, reference, ks, resamples=ev.bootstrap,
                                                            seed=ev.seed, level=ev.ci_level))
    table = study.study_table(points)
    page = study.render_markdown(table, differences, dataset=args.dataset, level=ev.ci_level, simulated=simulated,
                                 notes=notes)
    write_text(args.metrics / "study.md", page)
    write_text(args.metrics / "study.csv", dvc_plot_csv(table, simulated=simulated, float_format="%.6f"))
    write_text(args.metrics / "paired.csv", dvc_plot_csv(differences, simulated=simulated, float_format="%.6f"))
    write_json(args.metrics / "study.json", {"simulated": simulated, "dataset": args.dataset, "reference": reference,
                                             "models": [run.endpoint for run in runs], "notes": notes,
                                             "points": table.to_dict("records"),
                                             "paired": differences.to_dict("records")})
    study.plot_accuracy_vs_usd(table, args.plots / "accuracy_vs_usd.png", dataset=args.dataset, simulated=simulated)
    study.write_model_headlines(args.headline, study.headlines(table, differences, max(ks), simulated=simulated))
    print(page)
    print(f"study: {args.metrics}/study.md, study.csv, paired.csv, study.json; {args.plots}/accuracy_vs_usd.png; "
          f"{args.headline}/<model>/<method>.json")


def load(params: Params, endpoint: str, dataset: str) -> ModelRun:
    paths = model_paths(endpoint, dataset, params.deepconf.endpoint)
    run = study.load_run(endpoint, paths, params.endpoints[endpoint].pricing)
    study.check_ks(run, params.study.k, paths.aggregate)
    return run


if __name__ == "__main__":
    stage_main(main)
