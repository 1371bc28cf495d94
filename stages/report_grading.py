"""Stage report_grading: every run of grading.runs side by side: metrics/grading.json (flat,
<run>.<dataset>.<metric>), metrics/headline/grading/<run>.json (the few figures `dvc metrics show` reads), the
table users keep (metrics/grading.md and .csv: dataset x metric rows, one column per run) and
plots/grading/word_counts.png."""

import argparse
from pathlib import Path

import orjson

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.errors import DataError
from tracevote.core.fileio import write_json, write_text
from tracevote.report.grading import grading_metrics, plot_word_counts, render_table, write_table_csv
from tracevote.report.headline import grading_headlines, write_headlines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--runs", default="grading/runs", type=Path, help="folder of the grade stage's <run>.json")
    parser.add_argument("--metrics", required=True, type=Path)
    parser.add_argument("--headline", default="metrics/headline/grading", type=Path,
                        help="folder for each run's short metrics file (report.headline)")
    parser.add_argument("--table", required=True, type=Path, help="markdown; a .csv of it is written beside")
    parser.add_argument("--plots", required=True, type=Path)
    args = parser.parse_args()
    params = load_params(args.params)
    # run names are checked names (core.config.DATASET_NAME)
    records = [_read_run(args.runs / f"{name}.json") for name in params.grading.runs]
    table = render_table(records)
    write_table_csv(args.table.with_suffix(".csv"), records)
    plot_word_counts(records, args.plots / "word_counts.png")
    write_text(args.table, table)
    write_json(args.metrics, grading_metrics(records))
    write_headlines(args.headline, grading_headlines(records))
    print(table)


def _read_run(path: Path) -> dict:
    if not path.is_file():
        raise DataError(f"{path}: the run's grades are missing (run the grade stage: `dvc repro`)")
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DataError(f"{path}: not a grading run record ({exc})") from exc


if __name__ == "__main__":
    stage_main(main)
