"""Where the API key comes from: the environment first, then a .env file. Entry points pass both in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tracevote.core.config import ModelConfig


def resolve_api_key(model: ModelConfig, environ: Mapping[str, str], dotenv_path: Path | None) -> str | None:
    """The key in environ[model.api_key_env], else in a .env file (KEY=VALUE lines), else None."""
    value = environ.get(model.api_key_env, "").strip()
    if value:
        return value
    if dotenv_path is None or not dotenv_path.is_file():
        return None
    return read_dotenv(dotenv_path.read_text(encoding="utf-8")).get(model.api_key_env) or None


def read_dotenv(text: str) -> dict[str, str]:
    """KEY=VALUE lines: '# comments', blank lines and an 'export ' prefix are skipped, quotes stripped."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name.strip()] = value
    return values
