"""Stage report_critiques: the critique scores per dataset and task as a table (metrics/critique.md) and one
figure (plots/critique/critique.png: the scores per subset beside predicted against true first-error steps),
plus plots/critique/f1_by_task.csv for `dvc plots`."""

import argparse
from pathlib import Path

import orjson

from tracevote.core.entry import stage_main
from tracevote.core.fileio import parse_json_object, write_text
from tracevote.report import critique
from tracevote.report.figures import plot_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--metrics", required=True, type=Path, help="metrics/critique.json")
    parser.add_argument("--details", required=True, type=Path, help="metrics/critique_results.jsonl")
    parser.add_argument("--by-task", required=True, type=Path, help="metrics/critique_by_task.csv")
    parser.add_argument("--table", required=True, type=Path)
    parser.add_argument("--plots", required=True, type=Path, help="folder for critique.png and f1_by_task.csv")
    args = parser.parse_args()
    metrics = orjson.loads(args.metrics.read_bytes())
    results = [parse_json_object(line, f"{args.details}: line {number}")
               for number, line in enumerate(args.details.read_bytes().splitlines(), start=1)]
    rows = critique.read_by_task_csv(args.by_task)
    simulated = bool(metrics["simulated"])
    models = sorted({str(result["model"]) for result in results if "model" in result})
    table = critique.render_markdown(rows, metrics, simulated=simulated, models=models)
    print(table)
    write_text(args.table, table)
    write_text(args.plots / "f1_by_task.csv",
               plot_csv(critique.f1_table(rows), simulated=simulated, float_format="%.2f"))
    critique.plot_critique(rows, [r["label"] for r in results], [r["prediction"] for r in results],
                           args.plots / "critique.png", simulated=simulated)
    print(f"report_critiques: {args.table}; {args.plots}/critique.png, f1_by_task.csv")


if __name__ == "__main__":
    stage_main(main)
