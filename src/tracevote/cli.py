"""`python -m tracevote …`: the one command-line entry point besides the DVC stage scripts."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tracevote import backend, budget, demo
from tracevote.config import Params, load_params
from tracevote.datasets import load_problems
from tracevote.dvclock import clear_stale_locks
from tracevote.entry import stage_main
from tracevote.errors import DataError
from tracevote.interchange import export_pool, import_file
from tracevote.pool import Pool, Setting, find_pool
from tracevote.sim import SimModel
from tracevote.simfaults import parse_faults
from tracevote.simserver import ServerOptions, serve

Handler = Callable[[argparse.Namespace], int]


def cmd_unlock(args: argparse.Namespace) -> int:
    stale = clear_stale_locks(Path(args.rwlock))
    for entry in stale:
        print(f"unlock: cleared the {entry.mode} lock on {entry.path} left by process {entry.pid}, which is "
              f"no longer running DVC "
              f"({entry.cmd or 'unknown command'})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    repo = Path.cwd()
    scratch = repo / "demo"
    problems = Path(args.dataset) if args.dataset else demo.BUILTIN_PROBLEMS
    demo.prepare(repo, scratch, problems)
    print(f"demo: simulated model on {problems} in the scratch project {scratch} (your workspace is untouched)")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for command in (["init", "--no-scm", "-q"], ["repro"]):
        completed = subprocess.run([sys.executable, "-m", "dvc", *command], cwd=scratch, env=env, check=False)
        if completed.returncode != 0:
            print(f"demo: `dvc {' '.join(command)}` failed in {scratch}", file=sys.stderr)
            return completed.returncode
    print(f"\ndemo: done. Report: {scratch}/metrics/summary.json and {scratch}/metrics/results.json; "
          f"plots: {scratch}/plots/accuracy_vs_k.png, {scratch}/plots/confidence.png")
    return 0


def _pool_for(args: argparse.Namespace, *, create: bool) -> tuple[Params, Pool]:
    params = load_params(args.params)
    if args.pool_dir:
        return params, Pool(Path(args.pool_dir))
    dataset_dir = Path("pools") / (args.dataset or params.dataset.name)
    setting = Setting.from_params(params)
    if create:
        return params, Pool.open_or_create(dataset_dir, setting, simulated=params.model.backend == "sim")
    pool = find_pool(dataset_dir, setting)
    if pool is None:
        raise DataError(f"{dataset_dir / setting.folder_name}: no pool for the setting params.yaml describes "
                        f"(run `make repro`, or name one with --pool-dir)")
    return params, pool


def cmd_pool_export(args: argparse.Namespace) -> int:
    _, pool = _pool_for(args, create=False)
    count = export_pool(pool, pool.problem_ids(), sys.stdout.buffer)
    print(f"pool export: {count} samples from {pool.root}", file=sys.stderr)
    return 0


def cmd_pool_import(args: argparse.Namespace) -> int:
    params, pool = _pool_for(args, create=True)
    problems = load_problems(args.problems or f"data/{args.dataset or params.dataset.name}.jsonl")
    summary = import_file(Path(args.samples), pool, problems, keep_top_logprobs=params.pool.keep_top_logprobs)
    print(f"pool import: {summary.read} samples read, {summary.stored} stored, {summary.already_stored} already "
          f"in {pool.root}" + (" (SIMULATED)" if summary.simulated else ""))
    return 0


def cmd_pool_status(args: argparse.Namespace) -> int:
    params = load_params(args.params)
    dataset_dir = Path("pools") / (args.dataset or params.dataset.name)
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
    params = load_params(args.params)
    answers = {p.problem: p.answer for p in load_problems(args.problems)} if args.problems else {}
    options = ServerOptions(api_key=args.api_key, models=tuple(args.models.split(",")) if args.models else None,
                            no_balance=args.no_balance)
    print(f"sim-server: SIMULATED model (seed {params.model.sim.seed}, signal {params.model.sim.signal}), "
          f"faults {args.faults or 'none'}; ^C stops it", flush=True)
    serve(args.host, args.port, SimModel(params.model.sim, answers), parse_faults(args.faults or ""), options,
          on_ready=lambda url: print(f"sim-server: listening on {url}", flush=True))
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    params = load_params(args.params)
    api_key = backend.api_key_for(params.model, os.environ, Path(".env"), missing=0)
    with backend.open_sampler(params, [], api_key) as sampler:
        report = sampler.probe()
    print(report.render())
    return 0 if report.informative else 1


def cmd_estimate(args: argparse.Namespace) -> int:
    params = load_params(args.params)
    problems = load_problems(args.problems or f"data/{params.dataset.name}.jsonl")
    setting = Setting.from_params(params)
    sizes = [setting.prompt_bytes(p) for p in problems]
    print(f"{len(problems)} problems, max_tokens {setting.max_tokens}, "
          f"output at {params.pool.pricing.expected_output_fraction:.0%} of max_tokens; "
          f"pool.max_cost_usd is ${params.pool.max_cost_usd:.2f}")
    for n_pool in sorted({*args.n_pool, params.pool.n_pool}):
        cost = budget.estimate(sizes * n_pool, setting.max_tokens, params.pool.pricing)
        marker = "  <- params.yaml" if n_pool == params.pool.n_pool else ""
        over = "  (over the cap)" if cost.usd > params.pool.max_cost_usd else ""
        print(f"  n_pool {n_pool:>5}: {cost.render()}{over}{marker}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracevote", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    unlock = commands.add_parser("unlock", help="clear DVC stage locks left by killed `dvc repro` runs")
    unlock.add_argument("--rwlock", default=".dvc/tmp/rwlock")
    unlock.set_defaults(handler=cmd_unlock)

    pool = commands.add_parser("pool", help="inspect, export and import trace pools")
    pool_commands = pool.add_subparsers(dest="pool_command", required=True, metavar="ACTION")
    for name, handler, text in (("status", cmd_pool_status, "list this dataset's pools (* = params.yaml's setting)"),
                                ("export", cmd_pool_export, "write the pool as JSON lines to stdout"),
                                ("import", cmd_pool_import, "add samples from a JSON-lines file to the pool")):
        action = pool_commands.add_parser(name, help=text)
        action.add_argument("--params", default="params.yaml")
        action.add_argument("--dataset", help="dataset name (default: dataset.name in params.yaml)")
        if name != "status":
            action.add_argument("--pool-dir", help="a pool folder, instead of the setting params.yaml describes")
        if name == "import":
            action.add_argument("samples", help="the JSON-lines file (format in the README)")
            action.add_argument("--problems", help="normalized problems (default: data/<dataset>.jsonl)")
        action.set_defaults(handler=handler)

    probe = commands.add_parser("probe", help="check that the endpoint's logprobs carry a confidence signal")
    probe.add_argument("--params", default="params.yaml")
    probe.set_defaults(handler=cmd_probe)

    estimate = commands.add_parser("estimate", help="the cost of a pool of several sizes, before spending")
    estimate.add_argument("--params", default="params.yaml")
    estimate.add_argument("--problems", help="normalized problems (default: data/<dataset>.jsonl)")
    estimate.add_argument("--n-pool", type=int, nargs="+", default=[64, 256, 512, 1024, 4096])
    estimate.set_defaults(handler=cmd_estimate)

    sim = commands.add_parser("sim-server", help="serve the simulated model with DeepSeek's wire format")
    sim.add_argument("--params", default="params.yaml", help="model.sim is read from here")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8765)
    sim.add_argument("--faults", help="e.g. all=0.2 or 429=0.05,drop=0.05,slow_s=0.2 (README: fault spec)")
    sim.add_argument("--problems", help="normalized problems whose gold answers the sim should know")
    sim.add_argument("--api-key", help="require this bearer key (401 otherwise)")
    sim.add_argument("--models", help="comma-separated model names to accept (404 otherwise)")
    sim.add_argument("--no-balance", action="store_true", help="answer every request with 402")
    sim.set_defaults(handler=cmd_sim_server)

    demo_parser = commands.add_parser("demo", help="the whole pipeline on the simulated model, in ./demo")
    demo_parser.add_argument("--dataset", help="a .jsonl of problems (default: the built-in demo set)")
    demo_parser.set_defaults(handler=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    code = 0

    def run() -> None:
        nonlocal code
        code = handler(args)

    stage_main(run)
    return code


if __name__ == "__main__":
    sys.exit(main())
