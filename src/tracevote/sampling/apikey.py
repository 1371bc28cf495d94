"""Where the API key comes from: the environment first, then a .env file (read by python-dotenv, which the DeepConf
write-up's requirements name). Entry points pass both in."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.errors import ConfigError


def resolve_api_key(model: ModelConfig, environ: Mapping[str, str], dotenv_path: Path | None) -> str | None:
    """The key in environ[model.api_key_env], else in a .env file (KEY=VALUE lines: comments, `export`, quotes as
    python-dotenv reads them), else None. The file's values never enter os.environ."""
    value = environ.get(model.api_key_env, "").strip()
    if value:
        return value
    if dotenv_path is None or not dotenv_path.is_file():
        return None
    # here, not at the top: python-dotenv and the logging it imports cost ~0.03 CPU s, and most runs have no .env
    from dotenv import dotenv_values

    return (dotenv_values(stream=io.StringIO(read_dotenv(dotenv_path))).get(model.api_key_env) or "").strip() or None


def read_dotenv(path: Path) -> str:
    """The .env file's text; ConfigError naming the file and the byte when it is not UTF-8 (python-dotenv's own
    read raises a bare UnicodeDecodeError). The message never quotes the file's content: it may hold keys."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text at byte {exc.start} (line {line}, byte 0x{data[exc.start]:02x}); "
                          f"save it as UTF-8 (a key is plain ASCII)") from None
