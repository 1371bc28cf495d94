"""Reading a streamed response: its body's bytes as they arrive, through urllib3's own reads, with a wait that can
end before the next read comes.

The body is read by a thread of its own (`HTTPResponse.read1`: urllib3 takes the HTTP chunked framing off and
hands back what has arrived), so the reader of the events can wait for the next read with a time limit: it hands
held tokens to the observer when nothing more comes in time, and sees a cancel while it waits. A body read to its
end gives its connection back to the pool (urllib3 does, as for any body it reads whole); a stream closed before
its end is shut down first (`HTTPResponse.shutdown`, which wakes the read in progress), then closed by the caller,
so the server sees the client go and stops generating.
"""

from __future__ import annotations

import contextlib
import http.client
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator

import urllib3

from tracevote.core.retry import TransientError

READ_SIZE = 1 << 20  # bytes asked of a read at most; read1 returns what has arrived (with chunked framing, a chunk)
_FINISH = re.compile(rb'"finish_reason"\s*:\s*"')  # a finish_reason that is not null
_END = b""
END_GRACE_S = 5.0  # after [DONE], how long the body's last chunk may take before the connection is closed
_DONE = b"[DONE]"


class Reads:
    """What arrives on a stream, a read at a time; `next` waits at most `timeout` seconds (None: as long as the
    stream takes), and returns None when nothing came by then, b"" at the stream's end."""

    def next(self, timeout: float | None) -> bytes | None:
        raise NotImplementedError

    def arrived(self) -> bytes:
        """The bytes read that the caller did not take (the stream is over for it); recorded reads are each taken
        whole before the next is asked for."""
        return b""

    def finish(self) -> None:
        """Wait for the stream's end after its last event (the caller read what it needs)."""

    def close(self) -> None:
        """Stop reading (the caller is done with the stream)."""


class RecordedReads(Reads):
    """Recorded reads, one at a time, as they were read (benchmarks and tests, without a server)."""

    def __init__(self, pieces: Iterable[bytes]) -> None:
        self._pieces: Iterator[bytes] = iter(pieces)

    def next(self, timeout: float | None) -> bytes | None:
        for piece in self._pieces:
            if piece:
                return piece
        return _END


class ResponseReads(Reads):
    """A response's body, read on a thread of its own; a failed read raises TransientError ("timeout",
    "connection") from `next`, its words passed through `redact`.

    The thread reads ahead as the bytes arrive until it has read the server's `data: [DONE]`; after it, only when
    asked (`finish`). So a stream stopped before its end never reads the body's last chunk, which would give the
    connection back to the pool: a stopped stream's connection is always closed (but for a server that sends no
    `[DONE]` and had finished), a finished one's always reused."""

    def __init__(self, response: urllib3.BaseHTTPResponse, redact: Callable[[str], str]) -> None:
        self._response = response
        self._redact = redact
        self._asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: read once more; False: stop
        self._reads: queue.SimpleQueue[bytes | TransientError] = queue.SimpleQueue()
        self._ahead = True  # the thread reads ahead (no [DONE] read yet); it sets this False before it waits
        self._asked = False  # a read was asked for and its result not taken yet
        self._thread = threading.Thread(target=self._serve, name="stream-reads", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        last = b""  # the end of the last read: a `[DONE]` may be split between two (joined without copying a read)
        while self._ahead or self._asks.get():
            item = self._read()
            if isinstance(item, bytes) and (_DONE in item or _DONE in last + item[:len(_DONE) - 1]):
                self._ahead = False
            self._reads.put(item)
            if not item or isinstance(item, TransientError):
                return
            last = item[-len(_DONE):]

    def _read(self) -> bytes | TransientError:
        try:
            return self._response.read1(READ_SIZE, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as exc:
            return TransientError("timeout", self._redact(str(exc)))
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, ValueError) as exc:
            # ValueError: the body closed under the read (the stream was shut down)
            return TransientError("connection", self._redact(str(exc) or type(exc).__name__))

    def next(self, timeout: float | None) -> bytes | None:
        try:
            item = self._reads.get_nowait()
        except queue.Empty:
            if not self._ahead and not self._asked:
                self._asks.put(True)
                self._asked = True
            try:
                item = self._reads.get(timeout=timeout)
            except queue.Empty:
                return None
        self._asked = False
        if isinstance(item, TransientError):
            raise item
        return item

    def arrived(self) -> bytes:
        """The bytes read ahead and not taken when the stream was closed."""
        parts = []
        with contextlib.suppress(queue.Empty):
            while True:
                item = self._reads.get_nowait()
                if isinstance(item, bytes):
                    parts.append(item)
        return b"".join(parts)

    def finish(self) -> None:
        """Read on to the body's end (after the server's `data: [DONE]` the last HTTP chunk follows at once), so
        its connection is back in the pool (urllib3 puts it there) before the next call asks for one; a failed read,
        or no end within END_GRACE_S, leaves it to be closed."""
        deadline = time.monotonic() + END_GRACE_S
        with contextlib.suppress(TransientError):
            while self._thread.is_alive() and (left := deadline - time.monotonic()) > 0:
                if self.next(left) == _END:
                    return
        self.close()

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        # a read in progress is woken by a shutdown of the socket's reading side; RuntimeError: the body ended
        # meanwhile and its connection went back to the pool (a server that sends no [DONE]): nothing to wake
        with contextlib.suppress(RuntimeError, ValueError, OSError):
            self._response.shutdown()
        self._asks.put(False)
        self._thread.join()


def finish_arrived(rest: bytes) -> bool:
    """Whether bytes that arrived but were not read hold the server's finish_reason (it had finished the trace)."""
    return _FINISH.search(rest) is not None
