"""`python -m tracevote report`: the report stage's last output printed as it is, from --metrics or the
dataset's metrics/deepconf/<dataset> folder (which it finds reading params.yaml as plain YAML: light and
forgiving)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracevote.core.errors import ConfigError, DataError

REPORT_FILES = {"text": "report.txt", "csv": "results.csv", "md": "results.md"}


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
