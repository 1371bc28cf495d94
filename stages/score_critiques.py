"""Stage score_critiques: vote over each solution's critiques of critique.datasets, from their ledgers (offline),
into metrics/critique.json (flat: every figure), metrics/headline/critique/<dataset>.json (the few `dvc metrics show`
reads), metrics/critique_results.jsonl (per solution) and metrics/critique_by_task.csv."""

import argparse
from dataclasses import asdict
from pathlib import Path

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.errors import DataError
from tracevote.core.fileio import check_output_folders, write_json, write_jsonl
from tracevote.critique import build
from tracevote.critique.results import (
    CritiqueResult,
    by_task_rows,
    critique_metrics,
    dataset_results,
    write_by_task_csv,
)
from tracevote.report.headline import critique_headlines, write_headlines
from tracevote.report.tables import SIMULATED_BANNER
from tracevote.store.ledger import fingerprint_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--critiques", default="critiques", type=Path, help="folder of <dataset>.json manifests")
    parser.add_argument("--metrics", required=True, type=Path)
    parser.add_argument("--headline", default="metrics/headline/critique", type=Path,
                        help="folder for each dataset's short metrics file (report.headline)")
    parser.add_argument("--details", required=True, type=Path, help="per-solution JSON lines")
    parser.add_argument("--by-task", required=True, type=Path, help="CSV of the scores per dataset and task")
    args = parser.parse_args()
    params = load_params(args.params)
    check_output_folders(args.metrics.parent, args.headline, args.details.parent, args.by_task.parent)
    n_votes = params.critique.n_votes
    results: list[CritiqueResult] = []
    simulated = False
    for dataset in params.critique.datasets:
        manifest_path = args.critiques / f"{dataset}.json"  # a checked name: core.config.DATASET_NAME
        manifest, ledger = build.load_ledger(manifest_path)
        fingerprint = fingerprint_of(build.critique_setting(params, dataset))  # each dataset has its own template
        if manifest.fingerprint != fingerprint or manifest.n_votes < n_votes:
            raise DataError(f"{manifest_path}: its ledger was built under another critique setting than "
                            f"params.yaml's (or with fewer than {n_votes} votes); run build_critiques@{dataset} "
                            f"(`dvc repro`)")
        simulated |= manifest.simulated
        results += dataset_results(dataset, manifest.item_list(), ledger, n_votes)
    metrics = critique_metrics(results, simulated=simulated)
    rows = by_task_rows(results)
    write_jsonl(args.details, [{"simulated": simulated, "model": params.critique_model.name, **asdict(result)}
                               for result in results])
    write_by_task_csv(args.by_task, rows)
    write_json(args.metrics, metrics)
    write_headlines(args.headline, critique_headlines(results, simulated=simulated))
    banner = f"*** {SIMULATED_BANNER} ***\n" if simulated else ""
    print(banner + "\n".join(f"{key}: {value}" for key, value in metrics.items()))


if __name__ == "__main__":
    stage_main(main)
