"""The explorer site of a project: every section builder's pages, then the index of sections, written beside the
target and put in place only when all of it is written (a failed build keeps the last good site)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracevote.core.config import Params
from tracevote.explorer import critique_pages, debate_pages, grading_pages, pool_pages, table_pages
from tracevote.explorer.sitefiles import SiteWriter

SectionBuilder = Callable[[SiteWriter, Params, Path], list[dict[str, Any]]]
# Each writes its own data files and returns its index entries ({view, index, label, simulated, summary}).
SECTION_BUILDERS: tuple[SectionBuilder, ...] = (pool_pages.sections, debate_pages.sections, critique_pages.sections,
                                                grading_pages.sections, table_pages.sections)
TITLE = "tracevote explorer"


@dataclass(frozen=True)
class BuildSummary:
    out: Path
    sections: int
    files: int
    bytes: int
    simulated: bool


def build_site(params: Params, project_root: Path, out: Path) -> BuildSummary:
    """Write the site of the project at `project_root` to `out` (e.g. explorer/, index.html at its top)."""
    with SiteWriter(out) as writer:
        writer.copy_assets()
        entries = [entry for builder in SECTION_BUILDERS for entry in builder(writer, params, project_root)]
        simulated = any(entry["simulated"] for entry in entries)
        writer.put("index", {"title": TITLE, "simulated": simulated, "sections": entries})
        writer.finish()
    return BuildSummary(out=out, sections=len(entries), files=writer.files, bytes=writer.bytes, simulated=simulated)
