"""`python -m tracevote sim-server`: the simulated model served on a port, with the gold answers it knows (from
--problems or the project's normalized problems files), its faults, pace and provider profile, said in one banner.
The simulator is imported inside the command (light `--help`)."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tracevote.core.errors import ConfigError, DataError

if TYPE_CHECKING:
    from tracevote.core.config import Params


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
