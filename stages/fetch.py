"""Stage fetch (one per dataset): datasets.<name>.source -> the raw rows, as JSON lines (git-tracked, so a
clone never fetches).

Before replacing the previous raw file, the rows must pass normalize's checks: a source that went
empty or bad never overwrites the last good copy. The checks read the dataset's kind, keys and
answer_format, which fetch does not declare: they decide whether it writes, not what.
"""

import argparse
from pathlib import Path

from tracevote.core.config import load_params
from tracevote.core.entry import stage_main
from tracevote.core.errors import FetchError
from tracevote.core.fileio import write_jsonl
from tracevote.core.inputs import local_sources, refuse_output_sources
from tracevote.datasets.fetch import fetch_rows
from tracevote.datasets.folder import folder_summary
from tracevote.datasets.normalize import normalize_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--dataset", required=True, help="a key of datasets: in the params file")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # refused here too (`dvc repro normalize@<name>` does not run check_params), before the params' other problems
    sources = local_sources(Path(args.params))
    refuse_output_sources({name: path for name, path in sources.items() if name == args.dataset}, Path.cwd(),
                          Path(args.params))
    dataset = load_params(args.params).dataset(args.dataset)
    origin = dataset.source.path or dataset.source.hf_dataset
    try:
        rows = fetch_rows(dataset.source)
    except FetchError as exc:  # the hub unreachable, or refusing: name the ways to go on without it
        raise FetchError(f"{exc}. Offline, read local files instead: `python -m tracevote datasets local DIR` points "
                         f"every dataset with a file in DIR at it (and removes the rest), or set "
                         f"datasets.{args.dataset}.source.path (and watch) to a local file; `make try DATA=DIR` runs "
                         f"every method on the simulated model from such files") from None
    normalize_dataset(rows, dataset, origin=str(origin))  # raises "<origin>: ..., nothing written"
    write_jsonl(args.out, rows)
    print(f"fetch: {len(rows)} rows from {origin} -> {args.out}")
    if dataset.source.path and Path(dataset.source.path).is_dir():
        print(f"fetch: read {folder_summary(Path(dataset.source.path))}")


if __name__ == "__main__":
    stage_main(main)
