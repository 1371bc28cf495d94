"""Stage fetch (one per dataset): datasets.<name>.source -> the raw rows, as JSON lines (git-tracked, so a
clone never fetches).

A dataset whose source is a `pool` (datasets.pool_steps) is made of that dataset's DeepConf pool instead: the
manifest it depends on (source.watch) names the pool, and the pool dataset's raw rows (data/raw/<pool>.jsonl, beside
--out) carry the generator's step values that label each trace.

Before replacing the previous raw file, the rows must pass normalize's checks: a source that went
empty or bad never overwrites the last good copy. The checks read the dataset's kind, keys and
answer_format, which fetch does not declare: they decide whether it writes, not what.
"""

import argparse
from pathlib import Path
from typing import Any

from tracevote.core.config import params_of
from tracevote.core.config_datasets import DatasetConfig, SourceConfig
from tracevote.core.entry import stage_main
from tracevote.core.errors import DataError, FetchError
from tracevote.core.fileio import write_jsonl
from tracevote.core.inputs import local_sources, refuse_output_sources
from tracevote.core.names import check_inside
from tracevote.core.params_yaml import read_params_yaml
from tracevote.datasets.fetch import fetch_rows
from tracevote.datasets.folder import folder_summary
from tracevote.datasets.local import read_local_rows
from tracevote.datasets.normalize import normalize_dataset
from tracevote.datasets.pool_steps import Trace, derive_rows, generator_problems
from tracevote.datasets.problems import normalize_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--dataset", required=True, help="a key of datasets: in the params file")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # refused here too (`dvc repro normalize@<name>` does not run check_params), before the params' other problems
    params_path = Path(args.params)
    raw = read_params_yaml(params_path)  # parsed once: the local sources as plain YAML, then validated
    sources = local_sources(raw)
    refuse_output_sources({name: path for name, path in sources.items() if name == args.dataset}, Path.cwd(),
                          params_path)
    params = params_of(raw, params_path)
    dataset = params.dataset(args.dataset)
    if dataset.source.pool is not None:
        rows = _pool_rows(args.dataset, dataset.source, params.dataset(dataset.source.pool), Path(args.out).parent)
        normalize_dataset(rows, dataset, origin=dataset.source.watch)
        write_jsonl(args.out, rows)
        return
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


def _pool_rows(name: str, source: SourceConfig, pool: DatasetConfig, raw_folder: Path) -> list[dict[str, Any]]:
    """The rows of dataset `name` made of the traces of its source's pool (datasets.pool_steps.derive_rows)."""
    from tracevote.store.pool import pool_texts  # here: only a pool source reads a pool, and fetch runs per dataset

    assert source.pool is not None
    raw = raw_folder / f"{source.pool}.jsonl"  # as dvc.yaml names fetch@<pool>'s output: a dataset key, no path
    check_inside(raw_folder, raw)
    rows = read_local_rows(raw) if raw.is_file() else []
    if not rows:
        raise DataError(f"{raw}: the raw rows of datasets.{name}.source.pool ({source.pool}) are missing or empty; "
                        f"run `dvc repro fetch@{source.pool}`")
    problems = generator_problems(rows, normalize_rows(rows, pool, str(raw)), str(raw),
                                  f"datasets.{name}.source.pool ({source.pool})")
    manifest, texts = pool_texts(Path(source.watch), [problem.id for problem in problems])
    traces = {pid: [Trace(f.sample_id, f.text, f.finish_reason) for f in fields] for pid, fields in texts.items()}
    derived = derive_rows(problems, traces, task=source.pool, per_problem=source.per_problem, seed=source.sample_seed,
                          simulated=manifest.simulated)
    print(f"fetch: {name} from the pool of {source.pool} ({manifest.pool}, {manifest.n_pool} per problem"
          f"{', SIMULATED' if manifest.simulated else ''}): {derived.summary()}")
    return derived.rows


if __name__ == "__main__":
    stage_main(main)
