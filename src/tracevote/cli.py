"""`python -m tracevote …`: the one command-line entry point besides the DVC stage scripts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tracevote.dvclock import clear_stale_locks
from tracevote.entry import stage_main

Handler = Callable[[argparse.Namespace], int]


def cmd_unlock(args: argparse.Namespace) -> int:
    stale = clear_stale_locks(Path(args.rwlock))
    for entry in stale:
        print(f"unlock: cleared the {entry.mode} lock on {entry.path} left by dead process {entry.pid} "
              f"({entry.cmd or 'unknown command'})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracevote", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    unlock = commands.add_parser("unlock", help="clear DVC stage locks left by killed `dvc repro` runs")
    unlock.add_argument("--rwlock", default=".dvc/tmp/rwlock")
    unlock.set_defaults(handler=cmd_unlock)
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
