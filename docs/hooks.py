"""MkDocs hooks: the params.yaml reference page is generated from the config classes on every build, so it
cannot drift from what check_params accepts."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from tracevote.core.params_docs import reference_markdown

PARAMS_PAGE = "reference/params.md"


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Add reference/params.md, written by tracevote.core.params_docs.reference_markdown() from the config classes,
    with the defaults of the params.yaml beside mkdocs.yml (whatever folder mkdocs runs from)."""
    params_file = Path(config.config_file_path).parent / "params.yaml"
    files.append(File.generated(config, PARAMS_PAGE, content=reference_markdown(params_file)))
    return files
