"""Stage score_debate: replay every debate of debate.datasets from its ledger (offline) into
metrics/debate.json (flat: every figure), metrics/headline/debate.json (the few `dvc metrics show` reads),
metrics/debate_results.json (per problem, the failed
problems and the calls) and metrics/debate.md (the per-problem table)."""

import argparse
from dataclasses import asdict
from pathlib import Path

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.errors import DataError
from tracevote.core.fileio import check_output_folders, write_json, write_text
from tracevote.debate import build
from tracevote.debate.results import DebateResult, contest_of, debate_metrics, debate_totals, problem_result
from tracevote.debate.table import debate_markdown
from tracevote.report.headline import debate_headline
from tracevote.report.tables import SIMULATED_BANNER
from tracevote.store.ledger import fingerprint_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--debates", default="debates", type=Path, help="folder of <dataset>.json manifests")
    parser.add_argument("--metrics", required=True, type=Path)
    parser.add_argument("--headline", default="metrics/headline/debate.json", type=Path,
                        help="the short metrics file (report.headline)")
    parser.add_argument("--details", required=True, type=Path)
    parser.add_argument("--table", required=True, type=Path, help="the per-problem Markdown table")
    args = parser.parse_args()
    params = load_params(args.params)
    check_output_folders(args.metrics.parent, args.headline.parent, args.details.parent, args.table.parent)
    results: list[DebateResult] = []
    simulated = False
    for dataset in params.debate.datasets:
        manifest_path = args.debates / f"{dataset}.json"  # a checked name: core.config.DATASET_NAME
        manifest, ledger = build.load_ledger(manifest_path)
        if manifest.fingerprint != fingerprint_of(build.debate_setting(params)):
            raise DataError(f"{manifest_path}: its ledger was built under another debate setting than params.yaml's; "
                            f"run build_debate@{dataset} (`dvc repro`)")
        selection = manifest.selection()
        if selection.span != params.debate.problems:
            raise DataError(f"{manifest_path}: its debates are of debate.problems {_span(selection.span)}, params.yaml "
                            f"says {_span(params.debate.problems)}; run build_debate@{dataset} (`dvc repro`)")
        simulated |= manifest.simulated
        problems = manifest.problem_list()
        debates = build.debates_for(problems, params)
        for position, problem, transcript in zip(selection.positions, problems, build.transcripts(ledger, debates),
                                                 strict=True):
            contest = contest_of(problem, position, selection.dataset_problems, dataset, params.debate)
            results.append(problem_result(dataset, contest, problem, transcript, params.debate))
    metrics = debate_metrics(results, params.debate, simulated=simulated)
    models = {"model": params.debate_model.name, "judge_model": params.judge_model.name}
    totals = debate_totals(results)
    write_json(args.details, {"simulated": simulated, **models, "problems": [asdict(r) for r in results],
                              "failed": totals.failed, "total_calls": totals.calls,
                              "calls_per_problem": totals.calls_per_problem})
    write_text(args.table, debate_markdown(results, metrics, totals, models=models,
                                           banner=SIMULATED_BANNER if simulated else ""))
    write_json(args.metrics, metrics)
    write_json(args.headline, debate_headline(results, simulated=simulated))
    banner = f"*** {SIMULATED_BANNER} ***\n" if simulated else ""
    print(banner + "\n".join(f"{key}: {value}" for key, value in metrics.items()))


def _span(span: tuple[int, int] | None) -> str:
    return "null (every problem)" if span is None else str(list(span))


if __name__ == "__main__":
    stage_main(main)
