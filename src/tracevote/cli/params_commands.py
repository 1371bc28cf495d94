"""`python -m tracevote params schema|reference`: params.yaml's JSON Schema and its Markdown reference, both
generated from the config classes."""

from __future__ import annotations

import argparse
import sys

from tracevote.core.fileio import write_text

SCHEMA_HELP = "write params.yaml's JSON Schema (editors complete keys and flag wrong values with it)"
CHECK_HELP = ("check the params file as the check_params stage does, a YAML syntax error in one line with its line "
              "and column")
REFERENCE_HELP = "print (or write) the params reference: every key with its type, default, bounds and meaning"


def add_params_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    params = subparsers.add_parser("params", help="params.yaml's JSON Schema and reference, from the config classes",
                                   description="params.yaml's JSON Schema and reference, from the config classes.")
    actions = params.add_subparsers(dest="params_command", required=True, metavar="ACTION")
    schema = actions.add_parser("schema", help=SCHEMA_HELP, description=SCHEMA_HELP[0].upper() + SCHEMA_HELP[1:] + ".")
    schema.add_argument("--out", default="params.schema.json", help="the file to write (default: %(default)s; "
                        "- prints it)")
    schema.set_defaults(handler=cmd_params_schema)
    reference = actions.add_parser("reference", help=REFERENCE_HELP,
                                   description=REFERENCE_HELP[0].upper() + REFERENCE_HELP[1:] + ".")
    reference.add_argument("--params", default="params.yaml", help="the params file whose values are the defaults "
                           "shown (default: %(default)s)")
    reference.add_argument("--out", default="-", help="the Markdown file to write (default: print it)")
    reference.set_defaults(handler=cmd_params_reference)
    check = actions.add_parser("check", help=CHECK_HELP, description=CHECK_HELP[0].upper() + CHECK_HELP[1:] + ".")
    check.add_argument("--params", default="params.yaml", help="the params file to check (default: %(default)s)")
    check.add_argument("--syntax", action="store_true", help="only that it reads as YAML (what DVC reads first, "
                       "before any stage): make repro checks this, each stage its own keys")
    check.set_defaults(handler=cmd_params_check)


def cmd_params_schema(args: argparse.Namespace) -> int:
    from tracevote.core.params_schema import schema_text

    return _emit(schema_text(), args.out)


def cmd_params_reference(args: argparse.Namespace) -> int:
    from tracevote.core.params_docs import reference_markdown

    return _emit(reference_markdown(args.params), args.out)


def cmd_params_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.syntax:
        from tracevote.core.params_yaml import read_params_yaml

        read_params_yaml(Path(args.params))
        return 0
    from tracevote.core.config import check_params

    check_params(args.params)
    print(f"params check: {args.params} is ok")
    return 0


def _emit(text: str, out: str) -> int:
    if out == "-":
        sys.stdout.write(text)
    else:
        write_text(out, text)
        print(f"wrote {out}")
    return 0
