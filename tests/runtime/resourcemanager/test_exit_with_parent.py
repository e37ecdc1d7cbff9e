"""A process that called ``exit_with_parent`` ends when its parent is killed (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from flintlock.runtime.processes import pid_alive
from flintlock.testing.waiting import wait_until_sync

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="PR_SET_PDEATHSIG is Linux's")

#: argv: <child code> <expected parent or "self">: starts the child, prints its pid, waits
PARENT = """
import os, subprocess, sys
expected = str(os.getpid()) if sys.argv[2] == "self" else sys.argv[2]
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], expected])
print(child.pid, flush=True)
child.wait()
"""
#: argv: <expected parent>: arms exit_with_parent, says so, sleeps; SIGTERM ends it with code 0
CHILD = """
import signal, sys, time
from flintlock.runtime.processes import exit_with_parent
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
exit_with_parent(int(sys.argv[1]))
print("armed", flush=True)
time.sleep(60)
"""


def _start(expected: str) -> tuple[subprocess.Popen[str], int]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, expected],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    return parent, int(parent.stdout.readline())


def test_the_child_ends_when_its_parent_is_killed() -> None:
    parent, child = _start("self")
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "armed"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        wait_until_sync(lambda: not pid_alive(child), 10, describe=lambda: f"child {child} runs")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_child_whose_parent_ended_before_it_armed_ends_at_once() -> None:
    parent, child = _start("1")  # as if its parent had died and init had adopted it
    try:
        assert parent.wait(20) == 0  # the child ended by itself, the parent with it
        assert not pid_alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
