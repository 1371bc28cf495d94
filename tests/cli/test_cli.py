"""The command line: `--help` stays light, `--version`, range checks on numbers, and `report`."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_PARAMS
from tracevote.cli.main import build_parser, main, package_version

HEAVY_MODULES = ["dvc", "matplotlib", "numpy", "pandas", "pyarrow", "requests"]

# Runs the CLI in a fresh interpreter (this one has imported everything by now) and prints which heavy
# top-level packages it loaded.
LOADED_AFTER = """
import contextlib, io, json, sys
from tracevote.cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
heavy = set(json.loads({heavy!r}))
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}} & heavy)))
"""


def heavy_modules_loaded_by(argv: list[str], cwd: Path) -> list[str]:
    script = LOADED_AFTER.format(heavy=json.dumps(HEAVY_MODULES))
    completed = subprocess.run([sys.executable, "-c", script, *argv], cwd=cwd, capture_output=True, text=True,
                               check=True)
    return json.loads(completed.stdout)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"], ["--version"], ["estimate", "--help"], ["probe", "--help"], ["report", "--help"],
        ["pool", "--help"], ["pool", "import", "--help"], ["pool", "status", "--help"], ["sim-server", "--help"],
        ["demo", "--help"], ["unlock", "--help"], ["estimate", "--n-pool", "0"], ["datasets", "local", "--help"],
    ],
)
def test_help_version_and_bad_arguments_import_no_heavy_module(tmp_path: Path, argv: list[str]) -> None:
    assert heavy_modules_loaded_by(argv, tmp_path) == []


def a_report(root: Path, text: str) -> None:
    """The fixture params and a report of their first DeepConf dataset, as `make repro` leaves them."""
    shutil.copy(FIXTURE_PARAMS, root / "params.yaml")
    (root / "metrics" / "deepconf" / "aime_2025").mkdir(parents=True)
    (root / "metrics" / "deepconf" / "aime_2025" / "report.txt").write_text(text)


def test_report_imports_no_heavy_module(tmp_path: Path) -> None:
    a_report(tmp_path, "report\n")
    assert heavy_modules_loaded_by(["report"], tmp_path) == []


def test_version_names_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"tracevote {package_version()}"
    assert package_version()[0].isdigit()


def test_the_version_is_looked_up_only_for_version() -> None:
    """importlib.metadata scans every installed distribution (~0.05 CPU s): a command's parser is built without it."""
    script = "import sys; from tracevote.cli.main import build_parser; build_parser(); print(sorted(sys.modules))"
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "'importlib.metadata'" not in completed.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["estimate", "--n-pool", "0", "-5"], "argument --n-pool: 0 is not a pool size (an integer >= 1)"),
        (["estimate", "--n-pool", "-5"], "argument --n-pool: -5 is not a pool size (an integer >= 1)"),
        (["estimate", "--n-pool", "many"], "argument --n-pool: 'many' is not a pool size (an integer >= 1)"),
        (["sim-server", "--port", "0"], "argument --port: 0 is not a TCP port (an integer from 1 to 65535)"),
        (["sim-server", "--port", "65536"], "argument --port: 65536 is not a TCP port (an integer from 1 to 65535)"),
        (["sim-server", "--tokens-per-second", "0"],
         "argument --tokens-per-second: 0 is not a generation pace (an integer >= 1)"),
        (["sim-server", "--send-buffer", "512"],
         "argument --send-buffer: 512 is not a socket buffer size (an integer >= 1024)"),
        (["report", "--format", "html"], "argument --format: invalid choice: 'html'"),
        (["sim-server", "--reasoning-parser", "deepseek_r1"],
         "argument --reasoning-parser: invalid choice: 'deepseek_r1' (choose from 'reasoning_content', 'reasoning')"),
    ],
)
def test_out_of_range_numbers_are_argument_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                  message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def all_parsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(prog, parser) for the parser and every subcommand under it."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                yield from all_parsers(subparser)


def test_every_option_and_command_has_help_text() -> None:
    missing = []
    for prog, parser in all_parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{prog} {choice.dest}" for choice in action._choices_actions if not choice.help]
            elif not action.help:
                missing.append(f"{prog} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


REPORT_FILES = [("text", "report.txt", "SIMULATED\nmethod  acc\n"), ("csv", "results.csv", "method,acc\ncons,0.5\n"),
                ("md", "results.md", "| method | acc |\n|---|---|\n| cons | 0.5 |\n")]


@pytest.mark.parametrize(("fmt", "name", "content"), REPORT_FILES)
def test_report_prints_the_stage_output_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str,
                                                   name: str, content: str) -> None:
    for _, other, text in REPORT_FILES:
        (tmp_path / other).write_text(f"the {other} file\n" if other != name else text)
    assert main(["report", "--metrics", str(tmp_path), "--format", fmt]) == 0
    assert capsys.readouterr().out == content


def test_report_defaults_to_text_from_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    a_report(tmp_path, "the report\n")
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 0
    assert capsys.readouterr().out == "the report\n"
    assert main(["report", "--dataset", "aime_2025"]) == 0
    assert capsys.readouterr().out == "the report\n"


def test_report_without_params_asks_whose(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["report"])
    assert exit_.value.code != 0
    assert "params.yaml: not found, so whose report to print is unknown; name it with --dataset or --metrics" in (
        capsys.readouterr().err)


@pytest.mark.parametrize("name", ["../../outside", "/etc", "a/b", ""])
def test_report_takes_a_dataset_name_never_a_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    a_report(tmp_path, "report\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--dataset", name])
    assert exit_.value.code != 0
    assert f"--dataset {name!r}: not a dataset name" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["text", "csv", "md"])
def test_report_before_any_run_says_how_to_make_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    fmt: str) -> None:
    assert main(["report", "--metrics", str(tmp_path / "metrics"), "--format", fmt]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("no report yet: run `dvc repro report` (or `make repro`)")


def test_report_of_a_dataset_deepconf_does_not_run_on_names_the_ones_it_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    a_report(tmp_path, "report\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--dataset", "gsm8k"])
    assert exit_.value.code == 2
    assert ("error: --dataset 'gsm8k': DeepConf runs on aime_2025 (deepconf.datasets in params.yaml), and "
            "metrics/deepconf/ holds no report of it") in capsys.readouterr().err


def test_report_not_made_yet_names_its_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FIXTURE_PARAMS, tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 1
    assert capsys.readouterr().err.startswith("no report yet: run `dvc repro report@aime_2025` (or `make repro`)")


def test_the_top_level_help_names_all_four_methods(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: it described only voting."""
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for method in ("DeepConf confidence voting", "multi-agent debate", "step-level critique", "grading"):
        assert method in text


