"""MkDocs hooks: the params.yaml reference page is generated from the config classes on every build, so it
cannot drift from what check_params accepts."""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from tracevote.core.params_docs import reference_markdown

PARAMS_PAGE = "reference/params.md"


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Add reference/params.md, written by tracevote.core.params_docs.reference_markdown()."""
    files.append(File.generated(config, PARAMS_PAGE, content=reference_markdown()))
    return files
