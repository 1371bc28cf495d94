"""Process groups we start and stop, and the signals that stop a run.

    with stopped_by_signals():              # SIGHUP, SIGTERM or SIGINT raises Stopped, once
        with own_group(command) as process:  # on leaving: stop_group(process), however the block ends
            process.wait()

A child started in its own session leads its own process group: a terminal's Ctrl-C or hang-up does not reach it,
so whoever started it stops it: `stop_group` stops its other processes first, then the whole group, and returns
once no process of the group is alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STOP_GRACE_S = 10.0
POLL_S = 0.05
PROC = Path("/proc")
STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """A stop signal arrived: a BaseException, like KeyboardInterrupt, so no `except Exception` swallows it.
    `stopped` collects what the cleanup on its way out stopped, for the closing line."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.stopped: list[str] = []
        super().__init__(f"stopped by {self.name}")


class _Stops:
    """Where the signals of the running `stopped_by_signals` block stand (there is one main thread)."""

    def __init__(self) -> None:
        self.raised = False
        self.shielded = 0  # depth of `shielded` blocks: a stop in progress is not cut short
        self.pending: int | None = None


_STOPS = _Stops()


@contextlib.contextmanager
def stopped_by_signals(signums: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Inside the block the first of `signums` raises Stopped, so `finally` clauses stop what the block started;
    later ones are let go (a second Ctrl-C does not cut the cleanup short), and one that comes while a group is
    being stopped (`shielded`) is raised once that stop is done. A signal this process ignores already (SIGHUP
    under `nohup`) is left ignored. Main thread only, as signal.signal."""
    global _STOPS
    _STOPS = _Stops()

    def stop(signum: int, frame: object) -> None:
        if _STOPS.raised:
            return
        if _STOPS.shielded:
            _STOPS.pending = signum
            return
        _STOPS.raised = True
        raise Stopped(signum)

    # a signal ignored from the start stays ignored: `nohup make real` asks to outlive the terminal
    watched = [signum for signum in signums if signal.getsignal(signum) != signal.SIG_IGN]
    previous = {signum: signal.signal(signum, stop) for signum in watched}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """A block no stop signal interrupts; one that came meanwhile is raised as Stopped at its end."""
    _STOPS.shielded += 1
    try:
        yield
    finally:
        _STOPS.shielded -= 1
    if not _STOPS.shielded and _STOPS.pending is not None and not _STOPS.raised:
        _STOPS.raised = True
        raise Stopped(_STOPS.pending)


@contextlib.contextmanager
def own_group(command: list[str], **options: Any) -> Iterator[subprocess.Popen[bytes]]:
    """`command` started in a session and process group of its own (`options` are Popen's); its group stopped on
    leaving, however the block ends. A stop signal during the start is held until the process is ours to stop."""
    process = None
    try:
        with shielded():
            process = subprocess.Popen(command, start_new_session=True, **options)
        yield process
    finally:
        if process is not None:
            stop_group(process)


def stop_group(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """Stop the process group `process` leads (started with start_new_session) and reap `process`.

    First SIGTERM to the group's other members only: `dvc repro` sees its stage end and exits by itself, having
    reaped it. Then SIGTERM to the whole group, then SIGKILL; each step waits up to `grace_s` for every process of
    the group to be gone (a zombie counts as gone: it runs nothing)."""
    with shielded():
        _stop_in_steps(process, grace_s)


def _stop_in_steps(process: subprocess.Popen[bytes], grace_s: float) -> None:
    group = process.pid
    steps = ((signal.SIGTERM, True), (signal.SIGTERM, False), (signal.SIGKILL, False))
    for sig, children_only in steps:
        if _gone(process, group):
            return
        targets = [pid for pid in live_members(group) if pid != group] if children_only else None
        if targets == []:
            continue
        _send(sig, group, targets)
        if _wait_gone(process, group, grace_s):
            return


def live_members(group: int) -> list[int]:
    """The pids of the running (not zombie) processes of process group `group`; from /proc where there is one,
    else the group's leader if any process of the group exists."""
    if not PROC.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return []
        return [group]
    return [pid for pid, pgrp, state in _proc_stats() if pgrp == group and state != "Z"]


def _proc_stats() -> Iterator[tuple[int, int, str]]:
    """(pid, process group, state) of every process."""
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:  # ended while we looked
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat.rsplit(")", 1)[1].split()
        yield int(entry.name), int(fields[2]), fields[0]


def _send(sig: signal.Signals, group: int, targets: list[int] | None) -> None:
    if targets is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)
        return
    for pid in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _gone(process: subprocess.Popen[bytes], group: int) -> bool:
    return process.poll() is not None and not live_members(group)


def _wait_gone(process: subprocess.Popen[bytes], group: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _gone(process, group):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True
