"""Stage score: the pool -> one row per sample (answer, correctness, validity, the four confidences).

Streams the pool one problem at a time, so peak memory does not grow with the number of problems.
"""

import argparse
from pathlib import Path

from tracevote.config import load_params
from tracevote.datasets import load_problems
from tracevote.entry import stage_main
from tracevote.fileio import write_parquet
from tracevote.pool import Pool, read_manifest
from tracevote.score import score_problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--problems", required=True)
    parser.add_argument("--manifest", required=True, type=Path)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    params = load_params(args.params)
    manifest = read_manifest(args.manifest)
    pool = Pool(manifest.pool_root(args.manifest))
    problems = load_problems(args.problems)
    frames = (score_problem(pool.read_problem(p.id, manifest.n_pool), p.answer, params.confidence, params.answers)
              for p in problems)
    metadata = {"simulated": str(manifest.simulated).lower(), "pool": manifest.pool}
    rows = write_parquet(args.out, frames, metadata)
    print(f"score: {rows} samples of {len(problems)} problems -> {args.out}"
          + (" (SIMULATED model)" if manifest.simulated else ""))


if __name__ == "__main__":
    stage_main(main)
