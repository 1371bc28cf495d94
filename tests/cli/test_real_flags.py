"""`tracevote real`'s flags: a value out of range is one line naming that flag alone, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracevote.cli.main import main


@pytest.mark.parametrize(("argv", "message"), [
    (["--problems", "2"], "error: real: --debates 10 (1 to --problems 2): out of range"),
    (["--problems", "0", "--debates", "1"], "error: real: --problems 0 (1-100): out of range"),
    (["--traces", "0"], "error: real: --traces 0 (>= 1): out of range"),
    (["--problems", "101", "--traces", "0"],
     "error: real: --problems 101 (1-100) and --traces 0 (>= 1): out of range"),
])
def test_a_flag_out_of_range_is_named_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["real", *argv])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == message
    assert not (tmp_path / "real").exists()  # refused before the scratch project or the engine
