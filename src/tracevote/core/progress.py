"""The paid stages' progress bar: redrawn in place on a terminal; in a file, a pipe or a CI log, whole lines, few.

tqdm redraws its bar with a carriage return at each refresh; written to a file, those redraws pile up on one line
(15 KB for a pool of a few hundred calls). When the stream is not a terminal, the bar is refreshed at most every
`FILE_INTERVAL` seconds and each refresh is one line of its own.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

FILE_INTERVAL = 30.0  # seconds between two lines at most, when the output is not a terminal


class WholeLines:
    """A stream for tqdm that writes each redraw as one line: "\\r 12/50 ..." -> " 12/50 ...\\n"; blank redraws (the
    padding tqdm writes to clear a longer line, the newline it ends with) write nothing."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        line = text.replace("\r", "").rstrip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(*, total: int | None, desc: str, unit: str, stream: TextIO | None = None,
                 interval: float = FILE_INTERVAL) -> tqdm:
    """tqdm on `stream` (stderr by default): on a terminal, redrawn in place at most once a second; otherwise one
    line at most every `interval` seconds (and the last line when it closes)."""
    # here, not at the top: every paid stage imports this module, and one that finds nothing to send (its pool
    # whole, its key missing) draws no bar; tqdm takes ~0.05 CPU s to import
    from tqdm import tqdm

    stream = sys.stderr if stream is None else stream
    if stream.isatty():
        return tqdm(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True, mininterval=1.0)
    # maxinterval too: tqdm's monitor thread would otherwise redraw a slow bar every 10 s
    return tqdm(total=total, desc=desc, unit=unit, file=WholeLines(stream), mininterval=interval,
                maxinterval=interval)
