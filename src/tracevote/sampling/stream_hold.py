"""Deciding when a streamed trace's tokens go to its observer: held back into batches far from a possible stop,
handed over as they come near one.

A batch goes over once `batch_chunks` token chunks are held, or `hold_s` seconds after the oldest of them arrived,
or at the stream's end. An observer may answer a batch with how many more tokens it can take before it could stop
(the live run's rule knows: deepconf.live.WindowStop.safe_tokens): the batch then holds no more than that many, so
near a stop the tokens go over as they arrive and the server runs on past the stop by what arrives meanwhile, not
by a batch. An observer that has not said could stop at any token: its batches are UNCOUNTED_CHUNKS or
UNCOUNTED_HOLD_S at most. A `cancel` event, once set, ends any hold at once (the live run's consensus stop).

>>> hold = Hold(batch_chunks=16, hold_s=None, counted=True)
>>> hold.due(8, held_for=0.0), hold.due(16, held_for=0.0), Hold(16, None, True, want=3).due(3, held_for=0.0)
(False, True, True)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

HOLD_CHUNKS = 1024  # stream_completion's default batch_chunks: tokens handed over at the latest this many chunks
# ... or this long after the first of them arrived: a live run's tokens cost a call of its stop rule per batch,
# not per token, and still reach it well within a window's worth of time (docs/endpoints.md)
HOLD_S = 0.3
# ... but no more than these while the observer has not said how many tokens it can take (it might stop at any)
UNCOUNTED_CHUNKS = 256
UNCOUNTED_HOLD_S = 0.1
CANCEL_POLL_S = 0.05  # while tokens are held, how often a wait looks at the cancel event


@dataclass
class Hold:
    """When held tokens go over. `counted`: whether the observer said how many tokens it can take before it could
    stop (or there is no observer); `want` is that count, as it last said (None: it gave none)."""

    batch_chunks: int
    hold_s: float | None  # None: no time bound (read_stream's recorded reads)
    counted: bool
    want: int | None = None
    cancel: threading.Event | None = None

    def heard(self, answer: object) -> None:
        """The observer's answer to a batch: a count of tokens it can take, or none."""
        self.want = answer if isinstance(answer, int) and not isinstance(answer, bool) else None
        self.counted = self.want is not None

    def target(self) -> int:
        """The chunks a batch holds at most: `batch_chunks`, fewer when the observer could stop sooner, and no more
        than UNCOUNTED_CHUNKS while it has not said when it could."""
        if not self.counted:
            return min(self.batch_chunks, UNCOUNTED_CHUNKS)
        return self.batch_chunks if self.want is None else max(1, min(self.batch_chunks, self.want))

    def longest_s(self) -> float | None:
        """The longest a token is held back: `hold_s`, and no more than UNCOUNTED_HOLD_S while the observer has not
        said when it could stop (so a stop is noticed soon after its token arrives)."""
        if self.hold_s is None or self.counted:
            return self.hold_s
        return min(self.hold_s, UNCOUNTED_HOLD_S)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def due(self, held: int, held_for: float) -> bool:
        """Whether `held` chunks, the oldest `held_for` seconds old, go over now."""
        longest = self.longest_s()
        return held >= self.target() or self.cancelled() or (longest is not None and held_for >= longest)

    def wait_s(self, held_for: float) -> float | None:
        """How long to wait for the next read while tokens are held (None: for as long as it takes): until their
        deadline, in slices short enough that a cancel is seen soon."""
        longest = self.longest_s()
        if self.cancel is not None:
            return CANCEL_POLL_S if longest is None else min(max(0.0, longest - held_for), CANCEL_POLL_S)
        return None if longest is None else max(0.0, longest - held_for)
