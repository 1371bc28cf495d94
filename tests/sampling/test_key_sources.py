"""Where a paid stage looks for its API key, and what it says when the key is not there: a .env that is not UTF-8
is one line naming the byte; the missing-key line names the places looked in, and inside a DVC temporary
workspace (`dvc exp run --queue` / `--temp`) says how to give the queue the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracevote.core.config_endpoints import ModelConfig, SimConfig
from tracevote.core.errors import ConfigError, TracevoteError
from tracevote.sampling.apikey import resolve_api_key
from tracevote.sampling.backend import api_key_for, dvc_temp_workspace

KEY_ENV = "TRACEVOTE_TEST_KEY"
MODEL = ModelConfig(backend="openai", base_url="http://127.0.0.1:9", name="deepseek-v4-flash", extra_body={},
                    api_key_env=KEY_ENV, needs_key=True,
                    sim=SimConfig(seed=0, signal=1.0, accuracy=0.45, mean_tokens=60))


@pytest.mark.parametrize(("content", "byte", "line"), [
    (f"{KEY_ENV}=sk-caf\xe9\n".encode("latin-1"), 25, 1),  # saved as Latin-1 by an old editor
    (b"# keys\n" + f"{KEY_ENV}=sk-ok\n".encode() + b"\xff\xfeO\x00=\x00", 32, 3),  # a UTF-16 paste at the end
])
def test_a_dotenv_that_is_not_utf8_is_one_line_naming_the_byte(tmp_path: Path, content: bytes, byte: int,
                                                               line: int) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        resolve_api_key(MODEL, {}, dotenv)
    message = str(caught.value)
    assert message.startswith(f"{dotenv}: not UTF-8 text at byte {byte} (line {line}, byte 0x{content[byte]:02x})")
    assert "sk-" not in message and "\n" not in message  # the file's content (a key) is never quoted


def test_a_utf8_dotenv_with_accents_in_a_comment_still_gives_the_key(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"# clé de Zoé\n{KEY_ENV}=sk-fine\n", encoding="utf-8")
    assert resolve_api_key(MODEL, {}, dotenv) == "sk-fine"


def test_the_missing_key_line_names_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(TracevoteError) as caught:
        api_key_for(MODEL, {KEY_ENV: "  "}, tmp_path / ".env", missing=12)
    message = str(caught.value)
    assert message.startswith("12 samples are missing and no API key is set for endpoint deepseek")
    assert f"looked in the environment (${KEY_ENV} empty) and in {tmp_path / '.env'} (no such file)" in message
    assert f"Export {KEY_ENV}=... or put it in .env" in message and "DVC temporary workspace" not in message
    (tmp_path / ".env").write_text("OTHER_KEY=sk-other\n")
    with pytest.raises(TracevoteError, match=rf"\${KEY_ENV} not set\) and in .*\.env \(no {KEY_ENV} in it\)"):
        api_key_for(MODEL, {}, tmp_path / ".env", missing=12)


def test_inside_a_dvc_temporary_workspace_it_says_how_to_give_the_queue_the_key(tmp_path: Path) -> None:
    workspace = tmp_path / "project" / ".dvc" / "tmp" / "exps" / "tmpa1b2c3"
    workspace.mkdir(parents=True)
    assert dvc_temp_workspace(workspace) == tmp_path / "project"
    assert dvc_temp_workspace(tmp_path / "project") is None
    with pytest.raises(TracevoteError) as caught:
        api_key_for(MODEL, {}, workspace / ".env", missing=3)
    message = str(caught.value)
    assert "DVC temporary workspace (dvc exp run --queue or --temp)" in message
    assert f"so {tmp_path / 'project' / '.env'} is not here" in message
    assert "`dvc exp run --queue --copy-paths .env ...`" in message and f"export {KEY_ENV}=..." in message
