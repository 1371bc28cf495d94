"""A YAML syntax error in params.yaml (a tab, an unclosed bracket) is one line with its file, line and column, wherever
our code reads the file first: every stage and command (load_params), `params check`, `make demo`/`make try`, and
`make repro` before DVC's own five-line message."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.test_demo_user_params import user_repo
from tests.conftest import REPO_ROOT, committed_params_text
from tests.dvcproject import run
from tests.fresh_clone import copy_plots_template, make, venv_stamp  # noqa: F401 (a fixture)
from tracevote.cli import demo
from tracevote.cli.main import main
from tracevote.core.config import load_params
from tracevote.core.errors import ConfigError

TAB = "\tn_pool: 16"  # an indented key of `pool:`, indented with a tab


def with_line(text: str, after: str, line: str) -> tuple[str, int]:
    """`text` with `line` inserted after the first line starting with `after`; and the new line's number."""
    lines = text.splitlines()
    at = next(i for i, each in enumerate(lines) if each.startswith(after)) + 1
    return "\n".join([*lines[:at], line, *lines[at:]]) + "\n", at + 1


@pytest.mark.parametrize(("line", "column", "says"), [
    (TAB, 1, "found character '\\t' that cannot start any token (a tab: YAML indents with spaces only)"),
    ("  k: [1, 2", 1, "expected ',' or ']', but got"),
])
def test_a_syntax_error_is_one_line_with_its_line_and_column(tmp_path: Path, line: str, column: int,
                                                             says: str) -> None:
    text, number = with_line(committed_params_text(), "pool:", line)
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_params(path)
    message = str(error.value)
    assert "\n" not in message
    if line == TAB:
        assert message == f"{path}:{number}:{column}: not valid YAML: {says}"
    else:  # the scanner finds an unclosed flow sequence where the next key starts
        assert message.startswith(f"{path}:") and f"not valid YAML: {says}" in message


def test_params_check_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, number = with_line(committed_params_text(), "pool:", TAB)
    (tmp_path / "params.yaml").write_text(text, encoding="utf-8")
    for syntax in ([], ["--syntax"]):
        with pytest.raises(SystemExit) as exit_:
            main(["params", "check", "--params", str(tmp_path / "params.yaml"), *syntax])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"error: {tmp_path / 'params.yaml'}:{number}:1: "), err


def test_params_check_passes_the_shipped_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "params.yaml").write_text(committed_params_text(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["params", "check"]) == 0
    assert capsys.readouterr().out == "params check: params.yaml is ok\n"


def test_make_demo_says_it_in_one_line(tmp_path: Path) -> None:
    repo = user_repo(tmp_path / "repo", pages=False)
    text, number = with_line((repo / "params.yaml").read_text(encoding="utf-8"), "pool:", TAB)
    (repo / "params.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{repo / 'params.yaml'}:{number}:1: not valid YAML: .*a tab"):
        demo.prepare(repo, repo / "demo", demo.BUILTIN_PROBLEMS)


@pytest.mark.slow
def test_make_repro_says_it_in_one_line_before_dvc(tmp_path: Path, venv_stamp: None,  # noqa: F811
                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    clone = tmp_path / "clone"
    run(tmp_path, "git", "clone", "-q", str(REPO_ROOT), str(clone))
    copy_plots_template(tmp_path_factory, clone)  # what `make setup` writes, so `make repro` has nothing to set up
    text, number = with_line((clone / "params.yaml").read_text(encoding="utf-8"), "pool:", TAB)
    (clone / "params.yaml").write_text(text, encoding="utf-8")
    result: subprocess.CompletedProcess = make(clone, "repro")
    assert result.returncode != 0
    assert f"error: params.yaml:{number}:1: not valid YAML: " in result.stderr, result.stderr
    assert "ERROR" not in result.stderr and "dvc repro" not in result.stdout  # DVC never started
