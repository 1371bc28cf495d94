"""Where the API key comes from: the environment first, then a .env file (read by python-dotenv, which the DeepConf
write-up's requirements name). Entry points pass both in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

from tracevote.core.config_endpoints import ModelConfig


def resolve_api_key(model: ModelConfig, environ: Mapping[str, str], dotenv_path: Path | None) -> str | None:
    """The key in environ[model.api_key_env], else in a .env file (KEY=VALUE lines: comments, `export`, quotes as
    python-dotenv reads them), else None. The file's values never enter os.environ."""
    value = environ.get(model.api_key_env, "").strip()
    if value:
        return value
    if dotenv_path is None or not dotenv_path.is_file():
        return None
    return (dotenv_values(dotenv_path).get(model.api_key_env) or "").strip() or None
