"""A simulated stream's pace: tokens made no faster than tokens_per_s, stalls, and noticing that the client hung
up (so the server stops making tokens nobody reads, as vLLM and llama.cpp do)."""

from __future__ import annotations

import select
import socket
import time


def client_gone(connection: socket.socket) -> bool:
    """Whether the client closed its end: the socket reads as end of file (vLLM checks the same per step)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class Generation:
    """A stream's generation pace: token n is made no earlier than n / tokens_per_s seconds after the first."""

    def __init__(self, tokens_per_s: float | None) -> None:
        self.tokens_per_s = tokens_per_s
        self.started = time.monotonic()
        self.made = 0

    def wait_for(self, tokens: int, connection: socket.socket) -> bool:
        """Waits until `tokens` more may be made; False when the client went away meanwhile."""
        if self.tokens_per_s is None:
            return True
        self.made += tokens
        ahead = self.started + (self.made - 1) / self.tokens_per_s - time.monotonic()
        return ahead <= 0 or not stalled(connection, ahead)


def stalled(connection: socket.socket, seconds: float) -> bool:
    """Sends nothing for `seconds`; True when the client went away meanwhile (so the stall ends early)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if client_gone(connection):
            return True
        time.sleep(min(left, 0.02))
    return False
