"""Reading `dvc status --json`: which params keys it names as changed for a stage."""

from __future__ import annotations

from typing import Any


def modified_params(entries: list[Any]) -> set[str]:
    """The params keys `dvc status --json` lists as changed deps of one stage (its entries, as the JSON gives them:
    `[{"changed deps": {"params.yaml": {"critique.n_votes": "modified"}}}]` -> {"critique.n_votes"})."""
    return {key for entry in entries if isinstance(entry, dict)
            for changed in entry.get("changed deps", {}).values() if isinstance(changed, dict)
            for key in changed}
