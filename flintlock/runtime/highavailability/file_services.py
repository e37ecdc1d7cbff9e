"""Leader election and retrieval through files on one host (``high-availability.type: FILE``).

Election: each contender holds ``<dir>/leader.lock`` open and tries an exclusive, non-blocking
``flock`` on it every ``poll_interval_s``; the one that gets it leads until it stops or its
process dies (the kernel releases the lock of a killed process at once, so a standby takes over
within one poll). The leader publishes its ``LeaderInformation`` in ``<dir>/leader.json``
(written to a temporary file, then renamed: readers see a whole document or the previous one).

Retrieval: a thread reads ``leader.json`` every ``poll_interval_s`` and tells its listener when
the leader session changed. A killed leader's file stays until the next leader replaces it;
callers of its stale addresses fail and retry, as with ZooKeeper between a session's expiry and
the next leader.

Plays the role of Flink's ``StandaloneLeaderElectionService`` for one process, but with real
failover between processes of one host; not for several hosts (use ZooKeeper).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import Any

from flintlock.runtime.highavailability.leader import (
    LeaderContender,
    LeaderInformation,
    LeaderRetrievalListener,
    new_session_id,
)

__all__ = ["FileLeaderElectionService", "FileLeaderRetrievalService", "read_leader"]

log = logging.getLogger(__name__)

LOCK_FILE = "leader.lock"
LEADER_FILE = "leader.json"


def read_leader(directory: str | Path) -> LeaderInformation | None:
    """The published leader under ``directory`` (None: none yet, or unreadable)."""
    try:
        return LeaderInformation.from_json(Path(directory, LEADER_FILE).read_text())
    except (OSError, ValueError):
        return None


class FileLeaderElectionService:
    """See the module docstring.

    Args:
        directory: the cluster's HA directory (created when missing).
        poll_interval_s: how often a standby tries the lock (s).
    """

    def __init__(self, directory: str | Path, poll_interval_s: float = 0.1) -> None:
        self.directory = Path(directory)
        self.poll_interval_s = poll_interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._session: str | None = None
        self._thread: threading.Thread | None = None

    def start(self, contender: LeaderContender) -> None:
        """Start competing; ``contender.grant_leadership`` is called once the lock is held.

        Raises:
            OSError: the directory cannot be created or the lock file opened.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        self._thread = threading.Thread(target=self._run, args=(contender,),
                                        name="file-leader-election", daemon=True)
        self._thread.start()

    def _run(self, contender: LeaderContender) -> None:
        assert self._fd is not None
        while not self._stop.is_set():
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._stop.wait(self.poll_interval_s)
                continue
            except OSError as exc:
                contender.handle_error(exc)
                return
            with self._lock:
                if self._stop.is_set():
                    return
                self._session = new_session_id()
                session = self._session
            log.info("leadership granted under %s (session %s)", self.directory, session)
            contender.grant_leadership(session)
            return  # held until stop(): a live process keeps its flock

    def has_leadership(self, session_id: str) -> bool:
        with self._lock:
            return self._session is not None and self._session == session_id

    def verify_leadership(self, session_id: str) -> bool:
        """``has_leadership``: the flock is held as long as this process lives (a stopped or
        paused process keeps it), so no other leader can exist meanwhile."""
        return self.has_leadership(session_id)

    def confirm_leadership(self, session_id: str, leader: LeaderInformation) -> bool:
        """Publish ``leader`` if ``session_id`` still leads; returns whether it was published."""
        if leader.session_id != session_id:
            raise ValueError(f"leader information of session {leader.session_id} confirmed "
                             f"under session {session_id}")
        with self._lock:
            if self._session != session_id:
                return False
            tmp = self.directory / f".{LEADER_FILE}.{os.getpid()}.tmp"
            tmp.write_text(leader.to_json())
            os.replace(tmp, self.directory / LEADER_FILE)
            return True

    def stop(self) -> None:
        """Stop competing; a leader withdraws its published information and releases the lock."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._session is not None:
                current = read_leader(self.directory)
                if current is not None and current.session_id == self._session:
                    (self.directory / LEADER_FILE).unlink(missing_ok=True)
                self._session = None
            if self._fd is not None:
                os.close(self._fd)  # releases the flock
                self._fd = None


class FileLeaderRetrievalService:
    """See the module docstring.

    Args:
        directory: the cluster's HA directory.
        poll_interval_s: how often ``leader.json`` is read (s).
    """

    def __init__(self, directory: str | Path, poll_interval_s: float = 0.1) -> None:
        self.directory = Path(directory)
        self.poll_interval_s = poll_interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, listener: LeaderRetrievalListener) -> None:
        self._thread = threading.Thread(target=self._run, args=(listener,),
                                        name="file-leader-retrieval", daemon=True)
        self._thread.start()

    def _run(self, listener: LeaderRetrievalListener) -> None:
        last: Any = object()  # nothing told yet
        while not self._stop.is_set():
            leader = read_leader(self.directory)
            if leader != last:
                last = leader
                try:
                    listener.notify_leader_address(leader)
                except Exception as exc:  # a listener's bug must not end retrieval
                    log.exception("leader retrieval listener failed")
                    listener.handle_error(exc)
            self._stop.wait(self.poll_interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
