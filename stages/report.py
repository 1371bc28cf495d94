"""Stage report: the aggregate -> the printed table, metrics for `dvc metrics`, curves and plots."""

import argparse
import datetime
from pathlib import Path

import orjson

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import write_json, write_text
from tracevote.datasets.problems import load_problems
from tracevote.deepconf.results import AggregateResult
from tracevote.report import headline, passk, plots, tables
from tracevote.report.compare import TraceTokens, tokens_per_trace
from tracevote.report.figures import plot_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--aggregate", required=True, type=Path)
    parser.add_argument("--scores", required=True, type=Path)
    parser.add_argument("--problems", required=True)
    parser.add_argument("--metrics", required=True, type=Path,
                        help="folder for summary.json, results.json/.csv/.md, report.txt")
    parser.add_argument("--headline", required=True, type=Path,
                        help="folder for the short metrics files `dvc metrics show` reads (report.headline)")
    parser.add_argument("--plots", required=True, type=Path, help="folder for the curve CSV and the PNGs")
    parser.add_argument("--runs", default="runs", type=Path, help="folder for timestamped snapshots")
    args = parser.parse_args()
    k = load_params(args.params).report.k
    stored = orjson.loads(args.aggregate.read_bytes())
    result, simulated = AggregateResult.from_json(stored["result"]), bool(stored["simulated"])

    text = "\n".join([tables.render(result, k, simulated=simulated, model=stored["model"]),
                      *passk.report_lines(result)])
    print(text)
    summary = tables.summary_metrics(result, k, simulated=simulated) | passk.summary_metrics(result, k)
    table = tables.results_table(result, k) + passk.table_records(result, k)
    results = {"model": stored["model"], **tables.problem_results(result, k, load_problems(args.problems),
                                                                  simulated=simulated)}
    curve = plots.accuracy_curve(result)
    write_json(args.metrics / "summary.json", summary)
    per_trace = tokens_per_trace([TraceTokens.read(args.scores)])
    headline.write_headlines(args.headline, headline.deepconf_headlines(result, k, per_trace, simulated=simulated))
    write_json(args.metrics / "results.json", results)
    write_text(args.metrics / "report.txt", text + "\n")
    write_text(args.metrics / "results.csv", tables.table_csv(table))
    markdown = tables.table_markdown(table, k, result.tie_break, result.ci_level, simulated=simulated)
    write_text(args.metrics / "results.md", markdown + (f"\n{passk.TABLE_NOTE}\n" if result.pass_at_k else ""))
    online = tables.online_rows(result)
    write_text(args.metrics / "online.csv", tables.table_csv(online, tables.ONLINE_COLUMNS))
    write_text(args.metrics / "online.md", tables.online_markdown(online, result, simulated=simulated)
               if online else "No online DeepConf result: every eval.k is below online.warmup.\n")
    write_text(args.plots / "accuracy_vs_k.csv", plot_csv(curve, simulated=simulated, float_format="%.6f"))
    plots.plot_accuracy(curve, result.methods, args.plots / "accuracy_vs_k.png", simulated=simulated,
                        online_methods=result.online_methods, ci_level=result.ci_level if result.bootstrap else None)
    plots.plot_confidence(plots.read_confidences(args.scores, result.measures), result.measures,
                          args.plots / "confidence.png", simulated=simulated)
    snapshot = args.runs / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    write_json(snapshot / "summary.json", summary)
    write_json(snapshot / "results.json", results)
    print(f"\nreport: {args.headline}; {args.metrics}/summary.json, results.json, results.csv, results.md, "
          f"online.md, online.csv, report.txt; {args.plots}/accuracy_vs_k.csv, {args.plots}/accuracy_vs_k.png, "
          f"{args.plots}/confidence.png; snapshot {snapshot}")


if __name__ == "__main__":
    stage_main(main)
