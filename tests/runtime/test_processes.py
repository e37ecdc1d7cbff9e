"""``process_group_alive``, and ``cluster stop`` waiting for a killed daemon's whole process
group (Linux's ``/proc``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from flintlock.client.standalone_cluster import _await_group_end
from flintlock.runtime.processes import pid_alive, process_group_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads Linux's /proc")


def _group_of_two() -> tuple[subprocess.Popen[bytes], int]:
    """A shell leading a new process group, with a child of its own in the group; returns the
    shell and the child's pid."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE,
                              start_new_session=True)
    assert leader.stdout is not None
    return leader, int(leader.stdout.readline())


def test_a_group_is_alive_while_any_member_runs_and_not_once_only_zombies_are_left() -> None:
    leader, child = _group_of_two()
    try:
        assert process_group_alive(leader.pid)
        os.kill(leader.pid, signal.SIGKILL)  # the leader: a zombie until we reap it
        deadline = time.monotonic() + 10
        while pid_alive(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_alive(leader.pid), "the killed leader still runs after 10 s"
        assert pid_alive(child)
        assert process_group_alive(leader.pid), "the group's other member runs"
        os.kill(child, signal.SIGKILL)
        # the unreaped leader (a zombie) does not keep the group alive
        assert _await_group_end(leader.pid, wait_s=10.0)
        assert not process_group_alive(leader.pid)
    finally:
        if process_group_alive(leader.pid):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=10)
    # reaped: no process of the group at all
    assert not process_group_alive(leader.pid)


def test_await_group_end_gives_up_after_its_wait_on_a_group_that_keeps_running() -> None:
    leader, _ = _group_of_two()
    try:
        started = time.monotonic()
        assert not _await_group_end(leader.pid, wait_s=0.3)
        assert time.monotonic() - started >= 0.3
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=10)
