"""The paid stages' progress bar: whole lines, few, when the output is a file; redrawn in place on a terminal."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import termios
from pathlib import Path

from tracevote.core.progress import progress_bar


def test_in_a_file_the_bar_writes_whole_lines_without_carriage_returns(tmp_path: Path) -> None:
    log = tmp_path / "stage.log"
    with (log.open("w", encoding="utf-8") as stream,
          progress_bar(total=500, desc="build_pool", unit="sample", stream=stream, interval=3600) as bar):
        for _ in range(500):
            bar.update(1)
            bar.set_postfix_str("tokens=12, retries=0", refresh=False)
    text = log.read_text(encoding="utf-8")
    assert "\r" not in text
    lines = text.splitlines()
    # the opening line and the closing one: the 498 updates between them fell inside one interval
    assert len(lines) == 2, lines
    assert lines[0].startswith("build_pool:   0%") and "500/500" in lines[-1], lines


def read_all(fd: int) -> str:
    """What is waiting to be read on `fd` (a pseudo-terminal hands it over in pieces)."""
    chunks = []
    while select.select([fd], [], [], 0)[0]:
        chunks.append(os.read(fd, 65536))
    return b"".join(chunks).decode()


def test_on_a_terminal_the_bar_is_redrawn_in_place() -> None:
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a new one is 0 columns wide
    try:
        with (os.fdopen(follower, "w", encoding="utf-8", closefd=False) as terminal,
              progress_bar(total=3, desc="build_pool", unit="sample", stream=terminal) as bar):
            bar.update(3)
        written = read_all(leader)
    finally:
        os.close(leader)
        os.close(follower)
    assert "\r" in written and "3/3" in written
