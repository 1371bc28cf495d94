"""Stage normalize: raw rows -> one checked {"id", "problem", "answer", "meta"} record per problem."""

import argparse

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.fetch import read_local_rows
from tracevote.datasets.problems import normalize_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--raw", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dataset = load_params(args.params).dataset
    problems = normalize_rows(read_local_rows(args.raw), dataset, origin=args.raw)
    write_jsonl(args.out, (problem.to_record() for problem in problems))
    print(f"normalize: {len(problems)} problems -> {args.out}")


if __name__ == "__main__":
    stage_main(main)
