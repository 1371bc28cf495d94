"""tracevote.engine.processes: the signals that stop a run, and process groups stopped children first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import wait_for
from tracevote.engine.processes import Stopped, live_members, own_group, shielded, stop_group, stopped_by_signals

# a leader that waits on a child of its own and exits 7 once the child has ended, whatever ended it
LEADER = ("import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
          "print(child.pid, flush=True); child.wait(); sys.exit(7)")
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
            "time.sleep(600)")


def test_the_first_stop_signal_raises_stopped_and_a_second_one_does_not_cut_the_cleanup_short() -> None:
    # SIGINT and SIGHUP handled as a terminal's job has them, whatever this process inherited: a shell ignores SIGINT
    # in a command it starts in the background (`make test &`), and stopped_by_signals leaves an ignored signal alone
    inherited = {signum: signal.signal(signum, signal.default_int_handler) for signum in (signal.SIGINT, signal.SIGHUP)}
    cleaned = []
    try:
        with pytest.raises(Stopped) as caught, stopped_by_signals():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                # the handler runs when the main thread next checks for signals, which may come later than the next
                # line when another thread took the signal: the second signal is sent only once the first has raised
                wait_for(lambda: False, "SIGINT's handler to raise Stopped")
            finally:
                os.kill(os.getpid(), signal.SIGHUP)
                cleaned.append("the cleanup ran to its end")
        assert (caught.value.signum, caught.value.name) == (signal.SIGINT, "SIGINT")
        assert cleaned == ["the cleanup ran to its end"]
        assert signal.getsignal(signal.SIGHUP) == signal.default_int_handler  # the handlers are put back
    finally:
        for signum, handler in inherited.items():
            signal.signal(signum, handler)


def test_a_signal_ignored_from_the_start_stays_ignored() -> None:
    """`nohup make real`: SIGHUP ignored by whoever started the command must not stop the run."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stopped_by_signals():
            os.kill(os.getpid(), signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_stop_signal_during_a_shielded_block_is_raised_at_its_end() -> None:
    reached = []
    with pytest.raises(Stopped) as caught, stopped_by_signals():
        with shielded():
            os.kill(os.getpid(), signal.SIGTERM)
            reached.append("the rest of the shielded block")
        reached.append("past the block")
    assert caught.value.name == "SIGTERM" and reached == ["the rest of the shielded block"]


def test_the_group_is_stopped_children_first_so_the_leader_ends_by_itself() -> None:
    """The leader (dvc, say) sees its child (the stage) end and exits on its own, having reaped it."""
    with own_group([sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True) as leader:
        child = int(leader.stdout.readline())
        assert sorted(live_members(leader.pid)) == sorted([leader.pid, child])
        stop_group(leader)
        assert leader.returncode == 7  # ended by itself, not by the signal (-15)
    assert live_members(leader.pid) == []


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    with own_group([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True) as stubborn:
        assert stubborn.stdout.readline().strip() == "ready"
        stop_group(stubborn, grace_s=0.5)
        assert stubborn.returncode == -signal.SIGKILL
    assert live_members(stubborn.pid) == []
