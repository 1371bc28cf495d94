"""Stage normalize (one per dataset): raw rows -> one checked record per line: {"id", "problem", "answer",
"meta"} for kind problems, {"id", "problem", "steps", "label", "task", "meta"} for kind steps (DeltaBench rows
converted first when steps_format is deltabench)."""

import argparse

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.fileio import write_jsonl
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.normalize import normalize_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--dataset", required=True, help="a key of datasets: in the params file")
    parser.add_argument("--raw", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dataset = load_params(args.params).dataset(args.dataset)
    records = normalize_dataset(read_local_rows(args.raw), dataset, origin=args.raw)
    write_jsonl(args.out, (record.to_record() for record in records))
    print(f"normalize: {len(records)} {dataset.kind} records -> {args.out}")


if __name__ == "__main__":
    stage_main(main)
