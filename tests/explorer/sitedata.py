"""Reading a built explorer site back: each data file's value, as the page's TV.put receives it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PUT = re.compile(r'TV\.put\("([a-z0-9_/]+)", (.*)\);\n', re.DOTALL)


def read_data(site: Path, path: str) -> Any:
    """The value data/<path>.js puts (and check it puts it under its own path)."""
    match = PUT.fullmatch((site / "data" / f"{path}.js").read_text(encoding="utf-8"))
    assert match, f"data/{path}.js is not one TV.put call"
    assert match.group(1) == path
    return json.loads(match.group(2))
