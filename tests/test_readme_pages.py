"""The README's table of documentation pages lists every page of the site (mkdocs.yml's nav), so a new page is
never left out of the first hour's map."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"


def nav_pages(entries: Any) -> Iterator[str]:
    """Every page of mkdocs.yml's nav: [{"Home": "index.md"}, {"Methods": [{...: "methods/debate.md"}]}] -> ..."""
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            if isinstance(value, list):
                yield from nav_pages(value)
            else:
                yield value


def readme_table_pages() -> set[str]:
    """The pages the rows of the table under the README's "## Documentation" heading name: a link to docs/<page>
    or, for the generated reference, the page in backquotes."""
    section = README.read_text(encoding="utf-8").split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| page ")]
    pages = set()
    for row in rows:
        first_cell = row.split("|")[1]
        pages |= set(re.findall(r"\]\(docs/([^)#]+)\)", first_cell)) | set(re.findall(r"`([\w/-]+\.md)`",
                                                                                      first_cell))
    return pages


def test_the_readme_lists_every_page_of_the_site() -> None:
    nav = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    site = set(nav_pages(nav)) - {"index.md"}  # the site's home is the table's own subject: "The site (make docs)"
    listed = readme_table_pages()
    assert sorted(site - listed) == [], "pages of mkdocs.yml's nav missing from the README's Documentation table"
    assert sorted(listed - site) == [], "pages in the README's Documentation table that the site does not have"
