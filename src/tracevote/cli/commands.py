"""What each `python -m tracevote` command does. tracevote.cli.main parses the arguments and calls one of these.

Heavy modules (numpy, pandas, pyarrow, requests, the pool and the simulator) are imported inside the
command that needs them, so `--help`, `--version` and `report` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import errno
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from tracevote.core.errors import ConfigError, DataError

T = TypeVar("T")

if TYPE_CHECKING:
    from tracevote.core.config import ModelConfig, Params
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
    from tracevote.datasets.fetch import read_local_rows

    for record in convert_rows(read_local_rows(args.file), args.file):
        sys.stdout.write(orjson.dumps(record).decode() + "\n")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from tracevote.cli.grade import run_grade

    return run_grade(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from tracevote.cli import demo

    repo = Path.cwd()
    scratch = repo / "demo"
    problems = Path(args.dataset) if args.dataset else demo.BUILTIN_PROBLEMS
    plan = demo.prepare(repo, scratch, problems, data=Path(args.data) if args.data else None)
    read_from = ", ".join(f"{name} from {path}" for name, path in plan.sources.items()) or str(problems)
    print(f"demo: simulated model on {read_from} in the scratch project {scratch} (your workspace is untouched)")
    for method in plan.fallbacks:
        print(f"demo: {method}: none of its datasets has a file in {args.data}; it runs on the built-in demo files")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in (["init", "--no-scm", "-q"], ["repro", *demo.repro_targets(args.method)]):
        completed = subprocess.run([sys.executable, "-m", "dvc", *command], cwd=scratch, env=env, check=False)
        if completed.returncode != 0:
            print(f"demo: `dvc {' '.join(command)}` failed in {scratch}", file=sys.stderr)
            return completed.returncode
    if args.method:  # one method ran: the other methods' outputs listed below do not exist
        print(f"\ndemo: done ({args.method}). Metrics under {scratch}/metrics, plots under {scratch}/plots")
        return 0
    name = plan.deepconf_dataset
    metrics, plots = scratch / "metrics" / "deepconf" / name, scratch / "plots" / "deepconf" / name
    print(f"\ndemo: done. DeepConf: {metrics}/summary.json and {metrics}/results.json; "
          f"plots: {plots}/accuracy_vs_k.png, {plots}/confidence.png. Debate: {scratch}/metrics/debate.json; "
          f"voting beside debate: {scratch}/metrics/compare/compare.md, "
          f"{scratch}/plots/accuracy_vs_tokens.png. Critique: {scratch}/metrics/critique.md, "
          f"{scratch}/plots/critique/critique.png. Grading: {scratch}/metrics/grading.md, "
          f"{scratch}/plots/grading/word_counts.png")
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
    from tracevote.core.config import DATASET_NAME

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
        return params, Pool(Path(args.pool_dir))
    dataset_dir = Path("pools") / _dataset_name(args, params)
    setting = Setting.from_params(params)
    if create:
        return params, Pool.open_or_create(dataset_dir, setting, simulated=params.model.backend == "sim")
    pool = find_pool(dataset_dir, setting)
    if pool is None:
        raise DataError(f"{dataset_dir / setting.folder_name}: no pool for the setting params.yaml describes "
                        f"(run `make repro`, or name one with --pool-dir)")
    return params, pool


def cmd_pool_export(args: argparse.Namespace) -> int:
    from tracevote.store.interchange import export_pool

    _, pool = _pool_for(args, create=False)
    count = export_pool(pool, pool.problem_ids(), sys.stdout.buffer)
    print(f"pool export: {count} samples from {pool.root}", file=sys.stderr)
    return 0


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
    _, pool = _pool_for(args, create=True)
    summary = store_file(Path(args.samples), checked, pool, problems,
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
    pool, summary = import_runs(Path(args.samples), lambda: _pool_for(args, create=True)[1], problems,
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
        print(f"no pools under {dataset_dir}")
    for root in roots:
        pool = Pool(root)
        counts = [len(pool.stored_ids(pid)) for pid in pool.problem_ids()] or [0]
        setting = pool.meta["setting"]
        print(f"{'*' if root.name == active else ' '} {root}: {len(counts)} problems, {min(counts)}-{max(counts)} "
              f"samples each; {setting['model']} T={setting['temperature']} max_tokens={setting['max_tokens']} "
              f"top_logprobs={setting['top_logprobs']}" + ("  SIMULATED" if pool.simulated else ""))
    return 0


def cmd_sim_server(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.core.profiles import PROFILES
    from tracevote.sim.faults import parse_faults
    from tracevote.sim.model import SimModel
    from tracevote.sim.server import ServerOptions, serve

    params = load_params(args.params)
    faults = parse_faults(args.faults or "")  # before the banner: a bad spec is the only line printed
    answers, known = _sim_answers(args.problems, params)
    options = ServerOptions(api_key=args.api_key, models=tuple(args.models.split(",")) if args.models else None,
                            no_balance=args.no_balance, profile=args.profile)
    print(f"sim-server: SIMULATED model (seed {params.model.sim.seed}, signal {params.model.sim.signal}), "
          f"enforcing profile {PROFILES[args.profile].describe()}, "
          f"faults {args.faults or 'none'}; ^C stops it", flush=True)
    print(known, file=sys.stderr if not answers else sys.stdout, flush=True)
    try:
        serve(args.host, args.port, SimModel(params.model.sim, answers), faults, options,
              on_ready=lambda url: print(f"sim-server: listening on {url}", flush=True))
    except OSError as exc:
        if exc.errno not in _CANNOT_BIND:
            raise
        raise ConfigError(f"--host {args.host} --port {args.port}: cannot listen there ({exc.strerror}); is another "
                          f"server (an earlier sim-server?) on that port? Choose another with --port") from None
    return 0


_CANNOT_BIND = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)  # taken, not this machine's, privileged


def _sim_answers(problems: str | None, params: Params) -> tuple[dict[str, int], str]:
    """The gold answers the simulated model knows, and a line saying where they came from: `--problems`, else
    every normalized problems file of the params' datasets under data/. Without any, its answers are random and
    every accuracy measured against it is meaningless: the line says so."""
    from tracevote.datasets.problems import load_problems

    if problems:
        paths = [Path(problems)]
    else:
        paths = [Path("data") / f"{name}.jsonl" for name, dataset in params.datasets.items()  # checked names
                 if dataset.kind == "problems" and (Path("data") / f"{name}.jsonl").is_file()]
    answers = {p.problem: p.answer for path in paths for p in load_problems(path)}
    if not answers:
        return answers, ("sim-server: WARNING: it knows no gold answers (no --problems, and no normalized problems "
                         "under data/: run `dvc repro normalize@<dataset>`), so its answers are random and any "
                         "accuracy measured against it means nothing")
    return answers, f"sim-server: knows the gold answers of {len(answers)} problems ({', '.join(map(str, paths))})"


def cmd_probe(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.sampling import backend

    params = load_params(args.params)
    model = params.deepconf_model
    print(f"probe: {model.describe()}", file=sys.stderr)
    api_key = backend.api_key_for(model, os.environ, Path(".env"), missing=0)
    with backend.open_sampler(params, [], api_key,
                              on_retry=lambda notice: print(notice.render(), file=sys.stderr, flush=True)) as sampler:
        report = sampler.probe()
    print(report.render())
    return 0 if report.informative else 1


def cmd_estimate(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.datasets.problems import load_problems
    from tracevote.sampling import budget
    from tracevote.store.pool import Setting

    params = load_params(args.params)
    problems = load_problems(args.problems or f"data/{params.deepconf.datasets[0]}.jsonl")
    setting = Setting.from_params(params)
    sizes = [setting.prompt_bytes(p) for p in problems]
    model = params.deepconf_model
    print(f"DeepConf pool on {_priced(model)}")
    print(f"  {len(problems)} problems, max_tokens {setting.max_tokens}, "
          f"output at {model.priced().expected_output_fraction:.0%} of max_tokens; "
          f"pool.max_cost_usd is ${params.pool.max_cost_usd:.2f}")
    for n_pool in sorted({*args.n_pool, params.pool.n_pool}):
        cost = budget.estimate(sizes * n_pool, setting.max_tokens, model.priced(),
                               simulated_as=budget.simulated_as(model))
        marker = "  <- params.yaml" if n_pool == params.pool.n_pool else ""
        over = "  (over the cap)" if cost.usd > params.pool.max_cost_usd else ""
        print(f"  n_pool {n_pool:>5}: {cost.render()}{over}{marker}")
    _estimate_debates(params)
    _estimate_critiques(params)
    _estimate_critic(params)
    return 0


def _priced(model: ModelConfig) -> str:
    """"gpt-4o-mini (endpoint gpt-4o-mini, profile openai-chat), $0.15 / $0.075 cached / $0.60 output per 1M
    tokens (checked 2026-03)"."""
    prices = model.priced()
    return (f"{model.describe()}: ${prices.input_cache_miss:g} input / ${prices.input_cache_hit:g} cached / "
            f"${prices.output:g} output per 1M tokens (checked {prices.checked})")


def _estimate_debates(params: Params) -> None:
    """The debate's worst case per dataset of debate.datasets whose normalized problems are on disk."""
    from tracevote.datasets.problems import load_problems
    from tracevote.debate.build import debates_for, worst_case_cost
    from tracevote.sampling import budget

    cfg, model, judge = params.debate, params.debate_model, params.judge_model
    print(f"debate agents on {_priced(model)}")
    if judge.endpoint != model.endpoint:
        print(f"debate judge on {_priced(judge)}")
    print(f"  {cfg.agents} agents, up to {2 * cfg.agents + 3} calls per problem, max_tokens {cfg.max_tokens}; "
          f"debate.max_cost_usd is ${cfg.max_cost_usd:.2f}")
    for name, problems in _normalized(cfg.datasets, load_problems):
        cost = worst_case_cost(debates_for(problems, params), model.priced(), judge_pricing=judge.priced(),
                               simulated_as=budget.simulated_as(model))
        over = "  (over the cap)" if cost.usd > cfg.max_cost_usd else ""
        print(f"  {name}, if no debate reaches consensus: {cost.render()}{over}")


def _estimate_critiques(params: Params) -> None:
    """Every critique of each dataset of critique.datasets whose normalized solutions are on disk."""
    from tracevote.critique.build import critiques_cost, dataset_template
    from tracevote.datasets.steps import load_step_records
    from tracevote.sampling import budget

    cfg, model = params.critique, params.critique_model
    print(f"critique on {_priced(model)}")
    print(f"  {cfg.n_votes} critiques per solution, max_tokens {cfg.max_tokens}; "
          f"critique.max_cost_usd is ${cfg.max_cost_usd:.2f}")
    for name, records in _normalized(cfg.datasets, load_step_records):
        cost = critiques_cost(records, dataset_template(params, name), cfg, model.priced(),
                              simulated_as=budget.simulated_as(model))
        over = "  (over the cap)" if cost.usd > cfg.max_cost_usd else ""
        print(f"  {name}, {len(records)} solutions: {cost.render()}{over}")


def _estimate_critic(params: Params) -> None:
    """Every critic call of each grading run whose gold and predictions are on disk (its max_samples items)."""
    from tracevote.grading.critic import calls_cost, critic_calls, critic_items
    from tracevote.grading.runs import run_inputs

    cfg = params.grading.critic
    if not cfg.enabled:
        print(f"grading critic: disabled (grading.critic.enabled: false); endpoint {cfg.endpoint} when enabled")
        return
    print(f"grading critic on {_priced(params.critic_model)}")
    print(f"  up to {cfg.max_samples} calls per run, max_tokens {cfg.max_tokens}; "
          f"grading.critic.max_cost_usd is ${cfg.max_cost_usd:.2f} per run")
    for run in params.grading.runs.values():
        gold = Path("data") / f"{run.dataset}.jsonl"  # a checked name: core.config.DATASET_NAME
        if not gold.is_file() or not Path(run.predictions).is_file():
            print(f"  {run.name}: {gold} or {run.predictions} is not there yet (dvc repro grade@{run.name})")
            continue
        items = critic_items(run_inputs(run, gold, params.answers).pairing(), cfg.max_samples)
        cost = calls_cost(critic_calls(items), params)
        over = "  (over the cap)" if cost.usd > cfg.max_cost_usd else ""
        print(f"  {run.name}, {len(items)} predictions: {cost.render()}{over}")


def _normalized(names: Iterable[str], load: Callable[[Path], list[T]]) -> Iterator[tuple[str, list[T]]]:
    """Each dataset's normalized records read by `load`; one not normalized yet is named, with the command."""
    for name in names:
        path = Path("data") / f"{name}.jsonl"  # a checked name: core.config.DATASET_NAME
        if not path.is_file():
            print(f"  {name}: {path} is not there yet (dvc repro normalize@{name})")
            continue
        yield name, load(path)


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
