"""Stage score_online: a live online run scored as the replay scores a working set; beside it Cons@K and the replay
on the same traces of a pool of the same setting, when the DeepConf stages scored one. Offline: reads the ledgers.
"""

import argparse
import contextlib
from pathlib import Path

import orjson

from tracevote.answers.mathverify import MathJudge
from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.errors import DataError
from tracevote.core.fileio import check_output_folders, write_json, write_text
from tracevote.datasets.problems import load_problems
from tracevote.deepconf.live import LiveAnswers
from tracevote.deepconf.live_results import pool_beside, score_run
from tracevote.deepconf.results import AggregateResult
from tracevote.report import live as report
from tracevote.report.compare import TraceTokens, tokens_per_trace
from tracevote.report.headline import live_headlines, write_headlines
from tracevote.store.live import read_manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--problems", required=True, type=Path, help="the dataset's normalized file (the golds)")
    parser.add_argument("--manifest", required=True, type=Path, help="build_online's manifest")
    parser.add_argument("--scores", required=True, type=Path, help="the score stage's folder (a pool's tables)")
    parser.add_argument("--aggregate", required=True, type=Path, help="the aggregate stage's folder")
    parser.add_argument("--metrics", required=True, type=Path)
    parser.add_argument("--headline", required=True, type=Path, help="the dataset's folder of headline metrics")
    parser.add_argument("--plots", required=True, type=Path)
    args = parser.parse_args()
    params = load_params(args.params)
    check_output_folders(args.metrics, args.headline, args.plots)
    manifest = read_manifest(args.manifest)
    if manifest.dataset != args.dataset:
        raise DataError(f"{args.manifest}: a live run of {manifest.dataset!r}, not of {args.dataset!r}")
    golds = {problem.id: problem.answer for problem in load_problems(args.problems)}
    math = params.dataset(args.dataset).answer_format == "math"
    with MathJudge(max_workers=1) if math else contextlib.nullcontext() as judge:
        answers = LiveAnswers(params.answers, golds, judge)
        problems = score_run(args.manifest, manifest, answers, params.eval.tie_break)
    live = report.summarize(problems, list(manifest.percentiles), bootstrap=params.eval.bootstrap,
                            seed=params.eval.seed, level=params.eval.ci_level, budget=manifest.budget)
    same, absent = pool_beside(args.scores / f"{args.dataset}.parquet", manifest, params.eval.tie_break)
    comparison = report.compare(same, live) if same else None
    aggregate = _aggregate(args.aggregate / f"{args.dataset}.json") if same else None
    repeated, repeated_absent = (None, absent) if aggregate is None else report.repeated_replay(
        aggregate, budget=manifest.budget, percentiles=manifest.percentiles, warmup=manifest.warmup,
        consensus=manifest.consensus)
    context = {"dataset": args.dataset, "simulated": manifest.simulated, "model": manifest.setting["model"],
               "problems": len(manifest.problems), "warmup": manifest.warmup, "budget": manifest.budget,
               "consensus": manifest.consensus, "group_size": manifest.group_size,
               "percentiles": manifest.percentiles}
    write_json(args.metrics / "summary.json",
               report.summary_json(live, comparison, absent, context, repeated, repeated_absent))
    write_headlines(args.headline, live_headlines(live, comparison, problems=len(manifest.problems),
                                                  budget=manifest.budget, simulated=manifest.simulated,
                                                  repeated=repeated))
    table = report.table_markdown(live, comparison, absent, budget=manifest.budget, simulated=manifest.simulated,
                                  repeated=repeated)
    write_text(args.metrics / "live.md", table)
    write_text(args.metrics / "problems.csv", report.problems_csv(problems, simulated=manifest.simulated))
    write_text(args.metrics / "live.csv", report.table_csv(live, comparison, repeated, budget=manifest.budget,
                                                          simulated=manifest.simulated))
    curves = [] if aggregate is None else _curves(aggregate, args.scores / f"{args.dataset}.parquet")
    report.plot_accuracy_vs_tokens(curves, live, args.plots / "accuracy_vs_tokens.png", dataset=args.dataset,
                                   simulated=manifest.simulated, comparison=comparison, budget=manifest.budget,
                                   absent=absent)
    print(table)  # what the run found, as every other scoring stage prints its table
    print(f"score_online: {len(manifest.problems)} problems x {len(live)} live methods -> {args.metrics}"
          + ("" if same else f" (no comparison: {absent})") + (" (SIMULATED model)" if manifest.simulated else ""))


def _aggregate(path: Path) -> AggregateResult:
    if not path.is_file():
        raise DataError(f"{path}: missing, while the pool's scores beside it are there: run `dvc repro` (aggregate)")
    return AggregateResult.from_json(orjson.loads(path.read_bytes())["result"])


def _curves(result: AggregateResult, scores: Path) -> list[report.Curve]:
    """Cons@K and the replayed online methods at each K from the aggregate stage, tokens per problem."""
    per_trace = tokens_per_trace([TraceTokens.read(scores)])
    cons = ([k * per_trace for k in result.k], [result.accuracy_at("cons", k).mean for k in result.k])
    online = {}
    for method in result.online_methods:
        rows = [(k, row) for k in result.k if (row := result.online_at(method, k)) is not None]
        online[method] = ([row.tokens for _, row in rows], [row.mean for _, row in rows])
    return report.pool_curves(cons, online, result.k)


if __name__ == "__main__":
    stage_main(main)
