"""Leader election by a lock file and leader retrieval by the leader's file, between threads of
this process and with another process that is killed while it leads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flintlock.runtime.highavailability.file_services import (
    FileLeaderElectionService,
    FileLeaderRetrievalService,
    read_leader,
)
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.testing.leadership import RecordingContender, RecordingListener
from flintlock.testing.waiting import wait_until_sync


def _info(session: str, n: int) -> LeaderInformation:
    return LeaderInformation(session, {"dispatcher": f"grpc://127.0.0.1:{n}/dispatcher",
                                       "rest": f"http://127.0.0.1:{n + 1}"})


def test_one_contender_leads_and_the_next_takes_over_when_it_stops(tmp_path: Path) -> None:
    first, second = FileLeaderElectionService(tmp_path), FileLeaderElectionService(tmp_path)
    a, b = RecordingContender(), RecordingContender()
    first.start(a)
    wait_until_sync(lambda: a.events, 5)
    second.start(b)
    listener = RecordingListener()
    retrieval = FileLeaderRetrievalService(tmp_path, poll_interval_s=0.02)
    retrieval.start(listener)
    try:
        assert first.confirm_leadership(a.session, _info(a.session, 7000))
        wait_until_sync(lambda: listener.seen and listener.seen[-1] is not None, 5,
                        describe=lambda: listener.seen)
        assert listener.seen[-1] == _info(a.session, 7000)
        assert b.events == []  # the lock is held: the second waits
        assert not second.confirm_leadership("stale", _info("stale", 1))  # not its session
        first.stop()  # withdraws its information and releases the lock
        wait_until_sync(lambda: b.events, 5)
        assert b.session != a.session and second.has_leadership(b.session)
        assert second.confirm_leadership(b.session, _info(b.session, 8000))
        wait_until_sync(lambda: listener.seen[-1] == _info(b.session, 8000), 5,
                        describe=lambda: listener.seen)
    finally:
        retrieval.stop()
        second.stop()
        first.stop()
    assert read_leader(tmp_path) is None and a.events[1:] == [] and b.events[1:] == []


def test_a_killed_leader_process_is_replaced(tmp_path: Path) -> None:
    """The kernel releases a killed process's lock: the standby in this process leads next."""
    program = textwrap.dedent(f"""
        import sys, threading
        from flintlock.runtime.highavailability.file_services import FileLeaderElectionService
        from flintlock.runtime.highavailability.leader import LeaderInformation
        granted = threading.Event()
        class C:
            def grant_leadership(self, s):
                service.confirm_leadership(s, LeaderInformation(s, {{"rest": "http://old"}}))
                print("leader", flush=True)
                granted.set()
            def revoke_leadership(self): pass
            def handle_error(self, e): print(e, flush=True)
        service = FileLeaderElectionService({str(tmp_path)!r})
        service.start(C())
        granted.wait()
        sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    standby, contender = FileLeaderElectionService(tmp_path, 0.02), RecordingContender()
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "leader"
        standby.start(contender)
        assert read_leader(tmp_path).addresses == {"rest": "http://old"}  # type: ignore[union-attr]
        assert contender.events == []
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        wait_until_sync(lambda: contender.events, 5)
        # the dead leader's information stays until the new leader publishes its own
        assert read_leader(tmp_path).addresses == {"rest": "http://old"}  # type: ignore[union-attr]
        assert standby.confirm_leadership(contender.session,
                                          _info(contender.session, 9000))
        assert read_leader(tmp_path) == _info(contender.session, 9000)
    finally:
        child.kill()
        standby.stop()


@pytest.mark.parametrize("text", ["", "{", '{"session_id": 3, "addresses": {}}',
                                  '{"session_id": "s", "addresses": {"rest": 1}}', "[]"])
def test_a_leader_file_that_is_not_a_leader_document_reads_as_no_leader(
        tmp_path: Path, text: str) -> None:
    (tmp_path / "leader.json").write_text(text)
    assert read_leader(tmp_path) is None
    with pytest.raises(ValueError, match="not a leader information document"):
        LeaderInformation.from_json(text)


def test_confirming_another_sessions_information_is_a_bug(tmp_path: Path) -> None:
    service, contender = FileLeaderElectionService(tmp_path), RecordingContender()
    service.start(contender)
    try:
        wait_until_sync(lambda: contender.events, 5)
        with pytest.raises(ValueError, match="confirmed under session"):
            service.confirm_leadership(contender.session, _info("other", 1))
    finally:
        service.stop()


