"""A write the disk refuses partway through a frame leaves the log whole: the writer cuts it back to where the
frame began (RLIMIT_FSIZE makes the refusal, in a child process, so any user can run it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import hang_guard_s
from tracevote.store.framing import survey

LIMIT = 10_000  # bytes: the log fills up within a few frames of 3,000 bytes, one of them cut partway
CHILD = """
import errno, resource, signal, sys
from pathlib import Path
from tracevote.store.frame_writer import FrameWriter
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
refused = []
with FrameWriter(Path(sys.argv[1])) as writer:
    for key in range(6):
        try:
            writer.append(key, bytes([key]) * 3000)
        except OSError as exc:
            assert exc.errno == errno.EFBIG, exc
            refused.append(key)
    writer.append(6, b"small")  # the room the cut gave back is usable again
print(*refused)
"""


def test_an_append_refused_partway_leaves_the_log_whole_and_usable(tmp_path: Path) -> None:
    log = tmp_path / "calls" / "item.tvf"
    child = subprocess.run([sys.executable, "-c", CHILD.format(limit=LIMIT), str(log)], capture_output=True,
                           text=True, timeout=hang_guard_s(), check=False)
    assert child.returncode == 0, child.stderr
    refused = [int(key) for key in child.stdout.split()]
    state = survey(log, check_every_crc=True).check()
    assert state.torn_bytes == 0 and state.size == state.good_end  # no partial frame left at the end
    assert refused == [3, 4, 5]  # three frames of 3,000 bytes and their headers fit under 10,000; the 4th was cut
    assert [frame.key for frame in state.frames] == [0, 1, 2, 6]
