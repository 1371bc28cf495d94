"""One idea per module: no module in src/ or stages/ over MAX_LINES lines (STYLE.md: a bigger one is missing a seam;
split it where the reader already draws a line, not by size)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
FOLDERS = ("src", "stages")


def line_count(path: Path) -> int:
    """Lines as `wc -l` counts them (a last line without a line break counts too)."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def module_lines(root: Path) -> dict[str, int]:
    """{path relative to `root`: lines} of every Python module under its src/ and stages/."""
    return {path.relative_to(root).as_posix(): line_count(path)
            for folder in FOLDERS for path in sorted((root / folder).rglob("*.py"))}


def too_long(lines: dict[str, int]) -> list[str]:
    return sorted(f"{path}: {count} lines" for path, count in lines.items()
                  if count > MAX_LINES)


def test_no_module_is_over_the_limit() -> None:
    found = too_long(module_lines(ROOT))
    assert not found, (f"modules over {MAX_LINES} lines (split each along an idea a reader can name; "
                       f"docs/project.md's layout table names the new modules):\n" + "\n".join(found))



def test_the_check_sees_a_long_module(tmp_path: Path) -> None:
    """Guards the check itself: a module one line over the limit is named, one at the limit is not, and a last
    line without a line break counts."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "stages").mkdir()
    (tmp_path / "src" / "pkg" / "long.py").write_text("x = 1\n" * MAX_LINES + "y = 2")
    (tmp_path / "stages" / "fits.py").write_text("x = 1\n" * MAX_LINES)
    lines = module_lines(tmp_path)
    assert lines == {"src/pkg/long.py": MAX_LINES + 1, "stages/fits.py": MAX_LINES}
    assert too_long(lines) == [f"src/pkg/long.py: {MAX_LINES + 1} lines"]
