"""`python -m tracevote pool status|export|import`: which pool a command means (--pool-dir, else the setting
params.yaml describes under pools/<dataset>), its pools listed, exported as JSON lines, or filled from a file or
the official runs' pickles. The pool and its readers are imported inside each command (light `--help`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracevote.core.errors import DataError

if TYPE_CHECKING:
    from tracevote.core.config import Params
    from tracevote.datasets.problems import Problem
    from tracevote.store.pool import Pool


def _dataset_name(args: argparse.Namespace, params: Params) -> str:
    """--dataset, else the first of deepconf.datasets (the one whose pool a DeepConf command means). It names the
    pools/<dataset> folder, so it must be a dataset of the params file (whose names DATASET_NAME checks): a
    ConfigError otherwise, never a path."""
    name = args.dataset or params.deepconf.datasets[0]
    params.dataset(name)
    return name


def _pool_for(args: argparse.Namespace, *, create: bool) -> tuple[Params, Pool]:
    from tracevote.core.config import load_params
    from tracevote.store.pool import Pool, Setting, find_pool

    params = load_params(args.params)
    if args.pool_dir:
        return params, _pool_at(Path(args.pool_dir), params, create=create)
    dataset_dir = Path("pools") / _dataset_name(args, params)
    setting = Setting.from_params(params)
    if create:
        return params, Pool.open_or_create(dataset_dir, setting, simulated=params.model.backend == "sim")
    pool = find_pool(dataset_dir, setting)
    if pool is None:
        raise DataError(f"{dataset_dir / setting.folder_name}: no pool for the setting params.yaml describes "
                        f"(run `make repro`, or name one with --pool-dir)")
    return params, pool


def _pool_at(root: Path, params: Params, *, create: bool) -> Pool:
    """The pool in --pool-dir; for an import, a new pool with the params' setting when the folder is new or empty."""
    from dataclasses import asdict

    from tracevote.store.pool import Pool, Setting

    if (root / Pool.META).is_file():
        return Pool(root)
    if create and (not root.exists() or (root.is_dir() and not any(root.iterdir()))):
        print(f"pool import: creating a new pool in {root} (the params file's setting: model "
              f"{params.deepconf_model.name}, backend {params.model.backend})", file=sys.stderr)
        return Pool.open_at(root, asdict(Setting.from_params(params)), simulated=params.model.backend == "sim")
    how = ("`pool import` creates a pool in a new or empty folder (with the params file's setting), so name one"
           if create else "`python -m tracevote pool status` lists the pools of a dataset; name one of them")
    raise DataError(f"--pool-dir {root}: not a pool (no {Pool.META}) and not an empty folder; {how}, or leave out "
                    f"--pool-dir to use pools/<dataset>/<the setting params.yaml describes>")


def _registered(pool: Pool, problems: list[Problem]) -> Pool:
    """`pool` with the digest of each problem's prompt recorded (a changed prompt under a known id is refused)."""
    from tracevote.sampling.prompts import setting_messages

    pool.register(setting_messages(problems, pool.setting))
    return pool


def cmd_pool_export(args: argparse.Namespace) -> int:
    """The pool as JSON lines on stdout (--fields: only those), a progress bar on stderr when it is a terminal."""
    from tqdm import tqdm

    from tracevote.store.interchange import EXPORT_FIELDS, export_fields, export_pool

    fields = EXPORT_FIELDS if args.fields is None else export_fields(args.fields)
    scores = None if args.scores is None else _read_scores(args.scores)  # before any line is written
    _, pool = _pool_for(args, create=False)
    problem_ids = pool.problem_ids()
    shown = not args.quiet and sys.stderr.isatty()
    # frame headers only, and only for a bar that shows: otherwise a pass over every log for nothing
    total = sum(len(pool.stored_ids(problem_id)) for problem_id in problem_ids) if shown else None
    with tqdm(total=total, unit="sample", desc="pool export", file=sys.stderr, dynamic_ncols=True,
              disable=not shown) as bar:
        count = export_pool(pool, problem_ids, sys.stdout.buffer, fields=fields, scores=scores,
                            on_sample=lambda: bar.update())
    if not args.quiet:
        print(f"pool export: {count} samples from {pool.root}", file=sys.stderr)
    return 0


def _read_scores(path: Path) -> dict[tuple[str, int], dict[str, float | None]]:
    """{(problem_id, sample_id): {measure: value}} from a score stage's table (data/scores/<dataset>.parquet)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracevote.core.config_deepconf import MEASURES

    if not path.is_file():
        raise DataError(f"--scores {path}: not found (the score stage writes data/scores/<dataset>.parquet: "
                        f"`dvc repro score@<dataset>`)")
    try:
        rows = pq.read_table(path, columns=["problem_id", "sample_id", *MEASURES]).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"--scores {path}: not a score table with problem_id, sample_id, "
                        f"{', '.join(MEASURES)} ({first})") from None
    return {(row["problem_id"], row["sample_id"]): {name: row[name] for name in MEASURES} for row in rows}


def cmd_pool_import(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.datasets.problems import load_problems
    from tracevote.store.interchange import store_file, validate_file

    params = load_params(args.params)
    problems = load_problems(args.problems or f"data/{_dataset_name(args, params)}.jsonl")
    n_pool = None if args.allow_any_sample_id else params.pool.n_pool
    if args.format == "deepconf-pickle":
        return _import_pickles(args, problems, n_pool)
    # validated before the pool is opened: opening a new setting's pool creates its folder
    checked = validate_file(Path(args.samples), {p.id for p in problems}, n_pool=n_pool)
    pool = _registered(_pool_for(args, create=True)[1], problems)
    summary = store_file(Path(args.samples), checked, pool,
                         keep_top_logprobs=params.pool.keep_top_logprobs, keep_top_tokens=params.pool.keep_top_tokens)
    print(f"pool import: {summary.read} samples read, {summary.stored} stored, {summary.already_stored} already "
          f"in {pool.root}" + (" (SIMULATED)" if summary.simulated else ""))
    return 0


def _import_pickles(args: argparse.Namespace, problems: list[Problem], n_pool: int | None) -> int:
    from tracevote.core.config import load_params
    from tracevote.store.deepconf_pickle import import_runs

    params = load_params(args.params)
    if not args.pool_dir and params.model.backend == "sim":  # checked before the pool's folder is created
        raise DataError(f"{args.params}: model.backend is sim, but the official runs' pickles hold a real model's "
                        f"traces; import them with params naming that model on a real backend (or --pool-dir)")
    model = None if args.pool_dir else params.deepconf_model.name
    pool, summary = import_runs(Path(args.samples), lambda: _registered(_pool_for(args, create=True)[1], problems),
                                problems,
                                n_pool=n_pool, model=model)
    padded = f"; {summary.padded} with fewer confidences than tokens" if summary.padded else ""
    print(f"pool import: {summary.files} pickles, {summary.samples} traces read, {summary.stored} stored, "
          f"{summary.already_stored} already in {pool.root} (confidence only: no logprobs or token text{padded})")
    return 0


def cmd_pool_status(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.store.pool import Pool, Setting

    params = load_params(args.params)
    dataset_dir = Path("pools") / _dataset_name(args, params)
    active = Setting.from_params(params).folder_name
    roots = sorted(p.parent for p in dataset_dir.glob("*/pool.json"))
    if not roots:
        from tracevote.cli.missing_inputs import output_hint

        how = output_hint(Path.cwd(), dataset_dir)  # a fresh clone: pull it, or make it
        print(f"no pools under {dataset_dir}" + (f": {how}" if how else ""))
    for root in roots:
        pool = Pool(root)
        counts = [len(pool.stored_ids(pid)) for pid in pool.problem_ids()] or [0]
        setting = pool.meta["setting"]
        print(f"{'*' if root.name == active else ' '} {root}: {len(counts)} problems, {min(counts)}-{max(counts)} "
              f"samples each; {setting['model']} T={setting['temperature']} max_tokens={setting['max_tokens']} "
              f"top_logprobs={setting['top_logprobs']}" + ("  SIMULATED" if pool.simulated else ""))
    return 0
