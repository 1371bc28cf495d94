"""What each `python -m tracevote` command does. tracevote.cli.main parses the arguments and calls one of these.

Heavy modules (numpy, pandas, pyarrow, requests, the pool and the simulator) are imported inside the
command that needs them, so `--help`, `--version` and `report` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracevote.core.errors import ConfigError, DataError

if TYPE_CHECKING:
    from tracevote.core.config import Params
    from tracevote.datasets.problems import Problem
    from tracevote.store.pool import Pool
    from tracevote.store.verify import LedgerReport

REPORT_FILES = {"text": "report.txt", "csv": "results.csv", "md": "results.md"}


def cmd_unlock(args: argparse.Namespace) -> int:
    from tracevote.core.dvclock import clear_stale_locks

    for entry in clear_stale_locks(Path(args.rwlock)):
        print(f"unlock: cleared the {entry.mode} lock on {entry.path} left by process {entry.pid}, which is "
              f"no longer running DVC ({entry.cmd or 'unknown command'})")
    return 0


def _ledger_paths(args: argparse.Namespace) -> list[Path]:
    from tracevote.store.verify import DEFAULT_FOLDERS

    paths = args.paths or [Path(folder) for folder in DEFAULT_FOLDERS if Path(folder).is_dir()]
    if not paths:
        raise DataError(f"no ledgers here: none of {', '.join(DEFAULT_FOLDERS)} exists; name a PATH")
    return paths


def cmd_ledger_verify(args: argparse.Namespace) -> int:
    from tracevote.store.verify import find_ledgers, verify_ledger

    reports = [verify_ledger(root, logs) for root, logs in find_ledgers(_ledger_paths(args))]
    for report in reports:
        print(_ledger_lines(report))
    bad = [report for report in reports if not report.ok]
    if not reports:
        print("no ledgers found under " + ", ".join(map(str, _ledger_paths(args))))
    elif bad:
        targets = " ".join(str(log.path) for report in bad for log in report.logs if not log.ok)
        print(f"{len(bad)} of {len(reports)} ledgers have problems."
              + (f" `python -m tracevote ledger repair {targets}` keeps each damaged log's good frames; "
                 f"the next run of its stage requests only the calls dropped" if targets else ""))
    return 1 if bad else 0


def _ledger_lines(report: LedgerReport) -> str:
    frames = sum(log.good_frames for log in report.logs)
    lines = [f"{report.root}: {len(report.logs)} logs, {frames:,} good frames: "
             + ("ok" if report.ok else "PROBLEMS")]
    lines += [f"  {problem}" for problem in report.problems]
    for log in report.logs:
        lines += [f"  {log.path.name}: DAMAGED at {damage}" for damage in log.damage]
        lines += [f"  {log.path.name}: bad frame at {frame}" for frame in log.bad_frames]
        if log.torn_bytes:
            lines.append(f"  {log.path.name}: a torn tail of {log.torn_bytes:,} bytes (a kill mid-write; the next "
                         f"run cuts it and requests that call again)")
    return "\n".join(lines)


def cmd_ledger_repair(args: argparse.Namespace) -> int:
    from tracevote.store.verify import find_ledgers, repair_ledger

    repaired = [repair for root, logs in find_ledgers(_ledger_paths(args)) for repair in repair_ledger(root, logs)]
    for repair in repaired:
        print(f"{repair.path}: kept {repair.kept:,} good frames, dropped {repair.dropped_bytes:,} bytes")
    if not repaired:
        print("nothing to repair: every frame is good")
    else:
        print(f"repaired {len(repaired)} logs. The calls dropped are missing now: run the stage again (with "
              f"TRACEVOTE_REBUILD=1 if dvc.lock records it as built) and it requests only those")
    return 0


def cmd_critique_convert(args: argparse.Namespace) -> int:
    """DeltaBench records as ProcessBench-style items, one JSON object per line on stdout."""
    import orjson

    from tracevote.datasets.deltabench import convert_rows
    from tracevote.datasets.local import read_local_rows

    for record in convert_rows(read_local_rows(args.file), args.file):
        sys.stdout.write(orjson.dumps(record).decode() + "\n")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from tracevote.cli.grade import run_grade

    return run_grade(args)


def cmd_datasets_local(args: argparse.Namespace) -> int:
    from tracevote.cli.datasets_local import datasets_local

    print(datasets_local(args.data, args.params))
    return 0


def cmd_real(args: argparse.Namespace) -> int:
    from tracevote.cli import demo, real

    run = real.RealRun(args.problems, args.traces, args.debates, args.method)
    run.check()
    scratch = Path.cwd() / "real"
    with demo.scratch_lock(scratch):
        return real.run_real(Path.cwd(), scratch, run)


def cmd_demo(args: argparse.Namespace) -> int:
    from tracevote.cli import demo

    scratch = demo.scratch_for(Path.cwd(), args.method)
    with demo.scratch_lock(scratch):
        return _run_demo(args, Path.cwd(), scratch)


def _run_demo(args: argparse.Namespace, repo: Path, scratch: Path) -> int:
    from tracevote.cli import demo
    from tracevote.cli.demo_params import set_aside_line
    from tracevote.cli.plots import DEFAULT_TEMPLATE

    problems = Path(args.dataset) if args.dataset else demo.BUILTIN_PROBLEMS
    plan = demo.prepare(repo, scratch, problems, data=Path(args.data) if args.data else None)
    read_from = ", ".join(f"{name} from {path}" for name, path in plan.sources.items()) or str(problems)
    print(f"demo: simulated model on {read_from} in the scratch project {scratch} (your workspace is untouched)")
    for method in plan.fallbacks:
        print(f"demo: {method}: none of its datasets has a file in {args.data}; it runs on the built-in demo files")
    if plan.set_aside:
        print(set_aside_line(plan.set_aside))
    offline_page = repo / DEFAULT_TEMPLATE  # written by make setup: `dvc plots show` draws offline
    page = [["config", "plots.html_template", str(offline_page)]] if offline_page.is_file() else []
    failed = demo.run_dvc(scratch, [["init", "--no-scm", "-q"], *page, ["repro", *demo.repro_targets(args.method)]],
                          "demo")
    if failed:
        return failed
    print("\n" + demo.results_listing(scratch, plan.deepconf_dataset, repo, method=args.method))
    if args.method:  # in its own folder: the other methods' last results stay where they were
        where = os.path.relpath(scratch.parent, repo)
        print(f"demo: each method run alone keeps its results in {where}/<method>/, beside the others'")
    return 0


def _metrics_dir(args: argparse.Namespace) -> Path:
    """--metrics, else metrics/deepconf/<--dataset, else the first of deepconf.datasets in the params file>.

    The params file is read as plain YAML, not validated: printing a report stays light and works even
    when params.yaml has since been edited into something check_params would refuse."""
    if args.metrics:
        return Path(args.metrics)
    configured = _deepconf_datasets(Path(args.params))
    if args.dataset is None:
        if not configured:
            why = "not found" if not Path(args.params).is_file() else "no deepconf.datasets in it"
            raise ConfigError(f"{args.params}: {why}, so whose report to print is unknown; name it with --dataset "
                              f"or --metrics")
        return Path("metrics") / "deepconf" / configured[0]
    from tracevote.core.config_datasets import DATASET_NAME

    if not DATASET_NAME.match(args.dataset):  # a name, never a path
        raise ConfigError(f"--dataset {args.dataset!r}: not a dataset name (letters, digits, '_', '-', "
                          f"at most 64, starting with a letter or digit)")
    folder = Path("metrics") / "deepconf" / args.dataset
    if configured and args.dataset not in configured and not folder.is_dir():
        raise ConfigError(f"--dataset {args.dataset!r}: DeepConf runs on {', '.join(configured)} "
                          f"(deepconf.datasets in {args.params}), and metrics/deepconf/ holds no report of it")
    return folder


def _deepconf_datasets(params: Path) -> list[str]:
    """deepconf.datasets as the file says, or [] when it cannot be read (see _metrics_dir)."""
    import yaml

    try:
        names = yaml.safe_load(params.read_text(encoding="utf-8"))["deepconf"]["datasets"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return []
    return [str(name) for name in names] if isinstance(names, list) else []


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
                         keep_top_logprobs=params.pool.keep_top_logprobs)
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


def cmd_inputs(args: argparse.Namespace) -> int:
    from tracevote.cli.missing_inputs import hint, stage_inputs

    found = stage_inputs(Path.cwd(), args.targets)
    for inputs in found:
        print(hint(inputs, pulled=args.pulled) or f"inputs: {inputs.stage} has every input")
    return 1 if any(inputs.missing for inputs in found) else 0


def cmd_sim_server(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.core.profiles import PROFILES
    from tracevote.sim.faults import parse_faults
    from tracevote.sim.model import SimModel
    from tracevote.sim.server import ServerOptions, serve

    params = load_params(args.params)
    faults = parse_faults(args.faults or "")  # before the banner: a bad spec is the only line printed
    answer_sets, known = _sim_answers(args.problems, params)
    options = ServerOptions(api_key=args.api_key, models=tuple(args.models.split(",")) if args.models else None,
                            no_balance=args.no_balance, profile=args.profile,
                            tokens_per_s=args.tokens_per_second, send_buffer=args.send_buffer,
                            reasoning_parser=args.reasoning_parser, ignore_n=args.ignore_n, refuse_n=args.refuse_n,
                            context_window=args.context_window)
    print(f"sim-server: SIMULATED model (seed {params.model.sim.seed}, signal {params.model.sim.signal}), "
          f"enforcing profile {PROFILES[args.profile].describe()}, "
          f"faults {args.faults or 'none'}, {_pace_words(args.tokens_per_second, args.send_buffer)}"
          f"{_split_words(args.reasoning_parser)}"
          f"{', n ignored (one choice a reply)' if args.ignore_n else ''}"
          f"{', n > 1 refused (HTTP 500)' if args.refuse_n else ''}; ^C stops it",
          flush=True)
    for line in known:
        print(line, file=sys.stdout if line.startswith("sim-server: knows") else sys.stderr, flush=True)
    try:
        serve(args.host, args.port, SimModel(params.model.sim, answer_sets=answer_sets), faults, options,
              on_ready=lambda url: print(f"sim-server: listening on {url}", flush=True))
    except OSError as exc:
        if exc.errno not in _CANNOT_BIND:
            raise
        raise ConfigError(f"--host {args.host} --port {args.port}: cannot listen there ({exc.strerror}); is another "
                          f"server (an earlier sim-server?) on that port? Choose another with --port") from None
    return 0


def _pace_words(tokens_per_s: int | None, send_buffer: int | None) -> str:
    pace = f"{tokens_per_s} tokens/s per stream" if tokens_per_s else "streams as fast as the socket takes them"
    return pace + (f", send buffer {send_buffer} bytes" if send_buffer else "")


def _split_words(reasoning_parser: str | None) -> str:
    return f", solve replies' thinking in message.{reasoning_parser}" if reasoning_parser else ""


_CANNOT_BIND = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)  # taken, not this machine's, privileged


def _sim_answers(problems: str | None, params: Params) -> tuple[list[dict[str, int | str]], list[str]]:
    """The gold answers the simulated model knows, one map per file, and the lines saying where they came from:
    `--problems`, else every normalized problems file of the params' datasets under data/ (of any answer format).
    A project file it cannot read, or a gold it cannot write, is a warning naming it, never the end of the server.
    Without any answers, its answers are random and every accuracy measured against it is meaningless: a line
    says so."""
    if problems:
        paths = [Path(problems)]
    else:
        paths = [path for name, dataset in params.datasets.items()  # checked names
                 if dataset.kind == "problems" and (path := Path("data") / f"{name}.jsonl").is_file()]
    answer_sets, learnt, warnings = [], [], []
    for path in paths:
        golds, skipped = _file_golds(path, strict=bool(problems))
        warnings += skipped
        if golds:
            answer_sets.append(golds)
            learnt.append(str(path))
    known = sum(map(len, answer_sets))
    if not known:
        return [], [*warnings, "sim-server: WARNING: it knows no gold answers (no --problems, and no normalized "
                    "problems under data/: run `dvc repro normalize@<dataset>`), so its answers are random and any "
                    "accuracy measured against it means nothing"]
    return answer_sets, [*warnings, f"sim-server: knows the gold answers of {known} problems ({', '.join(learnt)})"]


def _file_golds(path: Path, *, strict: bool) -> tuple[dict[str, int | str], list[str]]:
    """The golds of one normalized problems file the simulator can answer with, and a warning line when it cannot
    answer some (naming the first); a file it cannot read is one warning, or with `strict` (--problems) the error."""
    from tracevote.datasets.problems import load_problems
    from tracevote.sim.golds import sim_gold

    try:
        problems = load_problems(path)
    except DataError as exc:
        if strict:
            raise
        return {}, [f"sim-server: WARNING: {path} skipped, it cannot be read: {str(exc).splitlines()[0]}"]
    golds: dict[str, int | str] = {}
    skipped: list[str] = []
    for problem in problems:
        gold, why_not = sim_gold(problem.answer)
        if gold is None:
            skipped.append(f"{problem.id}, {why_not}")
        else:
            golds[problem.problem] = gold
    if not skipped:
        return golds, []
    return golds, [f"sim-server: WARNING: {path}: {len(skipped)} of {len(problems)} problems skipped, their gold "
                   f"cannot be simulated (first: {skipped[0]}); it answers them at random"]


def cmd_probe(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.sampling import backend
    from tracevote.sampling.probe import samples_per_request

    params = load_params(args.params)
    model = params.deepconf_model
    print(f"probe: {model.describe()}", file=sys.stderr)
    api_key = backend.api_key_for(model, os.environ, Path(".env"), missing=0)
    with backend.open_sampler(params, [], api_key,
                              on_retry=lambda notice: print(notice.render(), file=sys.stderr, flush=True)) as sampler:
        report = sampler.probe()
        wanted = params.pool.samples_per_request
        per_request = samples_per_request(sampler.client, wanted, lambda line: print(f"probe: {line}"))[0] \
            if report.model_found and wanted > 1 else None
    print(report.render())
    if per_request is not None:
        print(f"  samples a request: {per_request} (pool.samples_per_request {wanted})")
    return 0 if report.informative else 1


def cmd_estimate(args: argparse.Namespace) -> int:
    """The work still missing, priced: one row per paid stage and dataset (tracevote.cli.estimate)."""
    from tracevote.cli.estimate import estimate_rows, render
    from tracevote.cli.estimate_context import context_rows, render_context
    from tracevote.core.config import load_params

    params = load_params(args.params)
    print(render(estimate_rows(params, args.n_pool or params.pool.n_pool)))
    windows = render_context(context_rows(params))
    if windows:
        print(f"\n{windows}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """The plan from each dataset's pilot (tracevote.cli.plan)."""
    from tracevote.cli.plan import Targets, run_plan
    from tracevote.core.config import load_params

    params = load_params(args.params)
    datasets = args.dataset or list(params.deepconf.datasets)
    if (args.scores or args.manifest) and len(datasets) != 1:
        raise ConfigError(f"--scores and --manifest name one pilot: give one --dataset (not {', '.join(datasets)})")
    unknown = [name for name in datasets if name not in params.deepconf.datasets]
    if unknown:
        raise ConfigError(f"--dataset: {unknown[0]!r} is not one of deepconf.datasets "
                          f"({', '.join(params.deepconf.datasets)})")
    methods = tuple(name.strip() for name in args.methods.split(",")) if args.methods else ()
    targets = Targets(args.target_width, args.difference, args.power, methods, args.max_k, args.draws)
    print(run_plan(params, datasets, targets, tuple(args.endpoint), args.scores, args.manifest, args.pilot_traces))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Print the report stage's last output as it is; the stage, not this command, renders it."""
    path = _metrics_dir(args) / REPORT_FILES[args.format]
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        stage = f"report@{path.parent.name}" if path.parent.parent == Path("metrics") / "deepconf" else "report"
        print(f"no report yet: run `dvc repro {stage}` (or `make repro`); {path} does not exist", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the report ({exc})") from exc
    sys.stdout.write(text)
    return 0
