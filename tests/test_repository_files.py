"""What git tracks: nothing large outside models/ (a wheel, a download, a pool), and nothing stray at the top level
beside the project's own files and folders (DEVELOPERS.md's layout)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LARGEST_TRACKED_BYTES = 1 << 20  # a file above this belongs in a DVC remote or a package, not in git
LARGE_FILES_FOLDER = "models"  # the shipped small model (models/tinymath.gguf, ~1.9 MB) is the one exception
TOP_LEVEL = {
    ".ci", ".dvc", ".dvcignore", ".gitignore", "Makefile", "README.md", "bench", "docs", "dvc.yaml", "mkdocs.yml",
    "models", "params.schema.json", "params.yaml", "pyproject.toml", "requirements.txt", "requirements-dev.txt",
    "requirements-engine.txt", "requirements-train.txt", "src", "stages", "tests", "train",
}


def tracked_files() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout with git on PATH ({exc})")
    return [path for path in listed.stdout.decode().split("\0") if path]


def large_files(paths: list[str], root: Path) -> list[tuple[str, int]]:
    """(path, bytes) of each file over LARGEST_TRACKED_BYTES outside models/, largest first."""
    sizes = [(path, (root / path).stat().st_size) for path in paths
             if not path.startswith(f"{LARGE_FILES_FOLDER}/") and (root / path).is_file()]
    return sorted(((path, size) for path, size in sizes if size > LARGEST_TRACKED_BYTES), key=lambda row: -row[1])


def stray_top_level(paths: list[str]) -> list[str]:
    return sorted({path.split("/", 1)[0] for path in paths} - TOP_LEVEL)


def test_no_tracked_file_over_a_megabyte_outside_models() -> None:
    assert large_files(tracked_files(), ROOT) == []


def test_nothing_stray_is_tracked_at_the_top_level() -> None:
    assert stray_top_level(tracked_files()) == []


def test_the_checks_see_a_large_file_and_a_stray_one(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "big.gguf").write_bytes(b"\0" * (LARGEST_TRACKED_BYTES + 1))
    (tmp_path / "tool-1.0-py3-none-any.whl").write_bytes(b"\0" * (LARGEST_TRACKED_BYTES + 1))
    (tmp_path / "README.md").write_text("small\n")
    paths = ["models/big.gguf", "tool-1.0-py3-none-any.whl", "README.md"]
    assert large_files(paths, tmp_path) == [("tool-1.0-py3-none-any.whl", LARGEST_TRACKED_BYTES + 1)]
    assert stray_top_level(paths) == ["tool-1.0-py3-none-any.whl"]
