"""The README stays a short first hour: at most 400 lines, a contents list whose anchors resolve, and every
relative link pointing at a file of the repository or a page of the docs site. (`make test` builds the site
itself with `mkdocs build --strict`, which checks the site's own links.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_README_LINES = 400
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")


def prose_lines(path: Path) -> list[str]:
    """The file's lines outside fenced code blocks (a `# comment` in a bash block is no heading)."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: "Real models: DeepSeek, OpenAI" -> "real-models-deepseek-openai"."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, a repeated one numbered as GitHub numbers it (-1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path):
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            anchor = github_anchor(match.group(1))
            found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
            seen[anchor] = seen.get(anchor, 0) + 1
    return found


def links(path: Path) -> list[str]:
    return [target for line in prose_lines(path) for target in LINK.findall(line)]


def contents_anchors() -> list[str]:
    """The targets of the bullets under the README's "## Contents" heading."""
    lines = prose_lines(README)
    start = lines.index("## Contents") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("## "))
    return [target for line in lines[start:end] for target in LINK.findall(line)]


def test_the_readme_is_at_most_400_lines() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; move detail to a page under docs/"


def test_the_contents_list_every_section_and_each_anchor_resolves() -> None:
    listed = contents_anchors()
    sections = [github_anchor(line[3:]) for line in prose_lines(README)
                if line.startswith("## ") and line != "## Contents"]
    assert listed == [f"#{anchor}" for anchor in sections]
    assert {anchor.removeprefix("#") for anchor in listed} <= anchors(README)


@pytest.mark.parametrize("target", sorted({t for t in links(README) if not t.startswith(EXTERNAL)}))
def test_each_relative_link_of_the_readme_points_at_a_file_or_docs_page(target: str) -> None:
    path, _, anchor = target.partition("#")
    if not path:
        assert anchor in anchors(README), f"README.md links #{anchor}, which no heading makes"
        return
    file = REPO / path
    assert file.resolve().is_relative_to(REPO), f"README.md links {target}, outside the repository"
    assert file.exists(), f"README.md links {target}, which does not exist"
    if anchor:
        assert anchor in anchors(file), f"README.md links {target}: {path} has no heading making #{anchor}"
