"""Stage compare: voting over a pool (Pass@1, Cons@K, DeepConf) beside debate on the datasets both ran on:
one table (metrics/compare/) and accuracy against completion tokens per problem: every voting method over K,
online DeepConf over K, and the debate (plots/accuracy_vs_tokens.csv for `dvc plots`, and .png)."""

import argparse
from pathlib import Path

import orjson

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import write_json, write_text
from tracevote.report import compare
from tracevote.report.figures import plot_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--debate-results", required=True, type=Path)
    parser.add_argument("--aggregate", required=True, type=Path, help="folder of data/aggregate/<dataset>.json")
    parser.add_argument("--scores", required=True, type=Path, help="folder of data/scores/<dataset>.parquet")
    parser.add_argument("--out", required=True, type=Path, help="folder for compare.md and compare.json")
    parser.add_argument("--plots", required=True, type=Path, help="folder for accuracy_vs_tokens.png/.csv")
    args = parser.parse_args()
    params = load_params(args.params)
    shared = [name for name in params.deepconf.datasets if name in params.debate.datasets]
    debate = orjson.loads(args.debate_results.read_bytes())
    simulated = bool(debate["simulated"])
    shown = shared or sorted({p["dataset"] for p in debate["problems"]})
    curve, note = None, ""
    if shared:
        curve, voting_simulated = compare.load_voting(args.aggregate, args.scores, shared)
        simulated |= voting_simulated
    else:
        note = (f"No dataset is in both deepconf.datasets {list(params.deepconf.datasets)} and debate.datasets "
                f"{list(params.debate.datasets)}: the debate is shown alone, on {', '.join(shown)}.")
    point = compare.debate_point([p for p in debate["problems"] if p["dataset"] in shown])
    rows = compare.comparison_rows(curve, point, params.report.k, params.debate.agents)
    table = compare.render_markdown(rows, shared, simulated=simulated, note=note)
    print(table)
    write_text(args.out / "compare.md", table)
    write_json(args.out / "compare.json", {"simulated": simulated, "datasets": shared, "rows": rows})
    write_text(args.plots / "accuracy_vs_tokens.csv",
               plot_csv(compare.curve_table(curve, point), simulated=simulated, float_format="%.4f"))
    compare.plot_accuracy_vs_tokens(curve, point, args.plots / "accuracy_vs_tokens.png", simulated=simulated,
                                    datasets=shown)
    print(f"compare: {args.out}/compare.md, compare.json; {args.plots}/accuracy_vs_tokens.png, .csv")


if __name__ == "__main__":
    stage_main(main)
