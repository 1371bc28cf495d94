"""Stage score: the pool -> one row per sample (answer, correctness, validity, the four confidences
of confidence.token, and with confidence.compare_signals each other signal's), and
the stop table: where each sample would stop under online DeepConf, for any threshold.

Streams the pool one problem at a time, so peak memory does not grow with the number of problems.
Problems are scored in up to TRACEVOTE_WORKERS processes (default 2), only as many as the pool's size
repays (tracevote.deepconf.score.paying_workers); TRACEVOTE_WORKERS=1 runs sequentially (for debugging).
The table is the same either way.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import check_output_folders
from tracevote.core.parquet import write_tables
from tracevote.datasets.problems import load_problems
from tracevote.deepconf.score import STOP_WRITE_OPTIONS, ScoredProblem, score_plan, score_pool
from tracevote.deepconf.signals import top_k_text
from tracevote.store.pool import Pool, read_manifest

if TYPE_CHECKING:
    import pyarrow as pa


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--problems", required=True)
    parser.add_argument("--manifest", required=True, type=Path)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stops", required=True, help="the stop table (Parquet)")
    args = parser.parse_args()
    params = load_params(args.params)
    check_output_folders(Path(args.out).parent, Path(args.stops).parent)
    manifest = read_manifest(args.manifest)
    pool = Pool(manifest.pool_root(args.manifest))
    problems = load_problems(args.problems)
    plan = score_plan(pool, [p.id for p in problems], params.confidence)
    scored = score_pool(pool, [(p.id, p.answer) for p in problems], manifest.n_pool, params.confidence,
                        params.answers, workers=_workers(), plan=plan)
    metadata = {"simulated": str(manifest.simulated).lower(), "pool": manifest.pool,
                "model": pool.meta["setting"]["model"],
                "group_size": str(params.confidence.group_size), **plan.metadata()}
    stops: list[pa.Table] = []
    rows = write_tables(args.out, _scores_keeping_stops(scored, stops), metadata)
    records = write_tables(args.stops, stops, metadata, **STOP_WRITE_OPTIONS)
    print(f"score: {rows} samples of {len(problems)} problems -> {args.out}; {records} stop records -> "
          f"{args.stops}; token signal {plan.token}, top_k {top_k_text(plan.top_k)}"
          + (" (SIMULATED model)" if manifest.simulated else ""))


def _scores_keeping_stops(problems: Iterator[ScoredProblem], stops: list[pa.Table]) -> Iterator[pa.Table]:
    """Each problem's score rows, keeping its stop rows in `stops` on the way (they are small)."""
    for problem in problems:
        stops.append(problem.stops)
        yield problem.scores


def _workers() -> int:
    value = os.environ.get("TRACEVOTE_WORKERS", "2")
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"TRACEVOTE_WORKERS: expected a whole number >= 1, got {value!r}")
    return int(value)


if __name__ == "__main__":
    stage_main(main)
