"""What the `python -m tracevote` commands without a module of their own do (pool, ledger, report and sim-server
have theirs: cli.pool_commands, cli.ledger_commands, cli.report_command, cli.sim_command); most hand over to the
module that does the work. tracevote.cli.main parses the arguments and calls one of these.

Heavy modules (numpy, pandas, pyarrow, requests, the pool and the simulator) are imported inside the
command that needs them, so `--help`, `--version` and `report` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tracevote.core.errors import ConfigError


def cmd_unlock(args: argparse.Namespace) -> int:
    from tracevote.core.dvclock import clear_stale_locks

    for entry in clear_stale_locks(Path(args.rwlock)):
        print(f"unlock: cleared the {entry.mode} lock on {entry.path} left by process {entry.pid}, which is "
              f"no longer running DVC ({entry.cmd or 'unknown command'})")
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


def cmd_inputs(args: argparse.Namespace) -> int:
    from tracevote.cli.missing_inputs import hint, stage_inputs

    found = stage_inputs(Path.cwd(), args.targets)
    for inputs in found:
        print(hint(inputs, pulled=args.pulled) or f"inputs: {inputs.stage} has every input")
    return 1 if any(inputs.missing for inputs in found) else 0


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
