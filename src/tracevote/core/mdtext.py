r"""Markdown that a report writes from input, read as the table it means: every Markdown report goes through here.

A name from input (a DeltaBench task, a problem id, a dataset, model or endpoint name, a predictions path) is data.
Written into a Markdown table as it is, a `|` splits its cell and a line break ends its row, so a name can forge
rows; `<script>` is passed through as HTML by every renderer that allows raw HTML (GitHub strips it, an IDE's
preview or mkdocs does not). `md_text` writes such text so that it stays one cell, on one line, shown as written:

    a|b            ->  a\|b                 (a pipe that splits nothing)
    x<newline>y    ->  x y                  (a line break, or any other control character, as a space)
    <script>&      ->  &lt;script&gt;&amp;
    tail\          ->  tail\\               (a trailing backslash cannot escape the cell's closing pipe)

CSV has its own door (core.csvtext); JSON outputs keep the text as it is.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")  # line breaks of every kind, and the other controls
_ESCAPES = str.maketrans({"\\": "\\\\", "|": "\\|", "&": "&amp;", "<": "&lt;", ">": "&gt;"})


def md_text(value: Any) -> str:
    """`value` (text from input, or anything printed with str) as text for a Markdown table cell or line."""
    return _CONTROL.sub(" ", str(value)).translate(_ESCAPES)
