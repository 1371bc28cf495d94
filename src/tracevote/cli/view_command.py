"""`python -m tracevote view`: the explorer, a static site of the project's pools, debates, critiques, grading runs
and study and compare tables that opens from file:// with no network. The DVC stage `view` runs it."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_OUT = Path("explorer")
DESCRIPTION = ("Write the explorer: a static site (open <out>/index.html in a browser, no server or network needed) "
               "of every DeepConf pool's problems and traces, sortable and filterable, with token confidence, and of "
               "the debates, critiques, grading runs and study and compare tables the project built. The site is "
               "replaced only when the whole build succeeds.")


def add_view_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    view = subparsers.add_parser("view", help="write the explorer, an offline site of the project's traces",
                                 description=DESCRIPTION)
    view.add_argument("--params", default="params.yaml", help="the params file to read (default: %(default)s)")
    view.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the site's folder (default: %(default)s)")
    view.set_defaults(handler=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    from tracevote.core.config import load_params
    from tracevote.explorer.build import build_site

    params = load_params(args.params)
    summary = build_site(params, Path.cwd(), args.out)
    print(f"view: {summary.out}/index.html, {summary.sections} sections, {summary.files} files, "
          f"{summary.bytes / 1e6:.1f} MB" + (" (SIMULATED model)" if summary.simulated else ""))
    return 0
