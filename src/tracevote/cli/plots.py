"""`python -m tracevote plots template`: write the page `dvc plots show` fills, with its chart libraries inlined.

`make setup` runs it; .dvc/config's plots.html_template names the file it writes (relative to .dvc/), so a plain
`dvc plots show` draws its charts without a network.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tracevote.core.errors import ConfigError

DEFAULT_TEMPLATE = Path(".dvc") / "plots_offline.html"


def add_plots_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plots = subparsers.add_parser("plots", help="the page `dvc plots show` fills, drawing without a network")
    actions = plots.add_subparsers(dest="plots_command", required=True, metavar="ACTION")
    text = ("write an HTML template for `dvc plots show --html-template` with vega, vega-lite and vega-embed "
            "inlined (from vl-convert-python), so the page draws offline")
    template = actions.add_parser("template", help=text, description=text[0].upper() + text[1:] + ".")
    template.add_argument("--out", type=Path, default=DEFAULT_TEMPLATE,
                          help="where to write it (default: %(default)s, which .dvc/config's plots.html_template "
                               "names)")
    template.set_defaults(handler=cmd_plots_template)


def cmd_plots_template(args: argparse.Namespace) -> int:
    from tracevote.core.fileio import write_text
    from tracevote.report.offline_page import offline_page, vega_bundle

    out: Path = args.out
    if out == DEFAULT_TEMPLATE and not out.parent.is_dir():  # a new .dvc/ would make this folder a DVC project
        raise ConfigError(f"no {out.parent}/ folder here: run this at the top of a DVC project, or give --out")
    bundle = vega_bundle()
    page = offline_page(bundle)
    write_text(out, page)
    print(f"plots template: wrote {out} ({len(page.encode()) / 1e6:.1f} MB; {bundle.versions}). "
          f"`dvc plots show --html-template {out}` draws without a network.")
    return 0
