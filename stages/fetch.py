"""Stage fetch: dataset.source -> the raw rows, as JSON lines (git-tracked, so a clone never fetches)."""

import argparse

from tracevote.config import load_params
from tracevote.entry import stage_main
from tracevote.fetch import fetch_rows
from tracevote.fileio import write_jsonl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    source = load_params(args.params).dataset.source
    rows = fetch_rows(source)
    write_jsonl(args.out, rows)
    print(f"fetch: {len(rows)} rows from {source.path or source.hf_dataset} -> {args.out}")


if __name__ == "__main__":
    stage_main(main)
