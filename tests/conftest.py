"""Shared fixtures: the repository root, and the shared data folder that CI places beside the clone."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip: the real AIME files live there and are never copied into the repo."""
    data = SHARED_DIR / "data"
    if not (data / "aime_2025.jsonl").is_file():
        pytest.skip(f"shared data not found at {data} (CI places ../shared beside the clone)")
    return data
