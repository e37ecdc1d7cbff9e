"""Leader election and retrieval through ZooKeeper (``high-availability.type: ZOOKEEPER``;
Flink ``ZooKeeperLeaderElectionDriver`` / ``ZooKeeperLeaderRetrievalDriver``), with kazoo.

Nodes under ``<path.root>/<cluster-id>`` (Flink's names, ``ZooKeeperUtils``):

- ``latch``: kazoo's lock recipe (sequential ephemeral nodes); the contender holding the lock
  leads.
- ``leader/connection_info``: the leader's ``LeaderInformation`` (JSON), an ephemeral node, so it
  disappears with the leader's session.

A leader gives up leadership as soon as its connection is SUSPENDED or LOST (Flink's default,
``high-availability.zookeeper.client.tolerate-suspended-connections: false``): it cannot know
whether its session still holds the lock, so it must stop acting as the leader. Retrieval
watches ``connection_info``. One ``KazooClient`` per process serves both (``connect``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from flintlock.exceptions import FlintlockException
from flintlock.runtime.highavailability.leader import (
    LeaderContender,
    LeaderInformation,
    LeaderRetrievalListener,
    new_session_id,
)

__all__ = ["ZooKeeperConnectionException", "ZooKeeperLeaderElectionService",
           "ZooKeeperLeaderRetrievalService", "connect", "read_zookeeper_leader"]

log = logging.getLogger(__name__)


class ZooKeeperConnectionException(FlintlockException):
    """The ZooKeeper quorum could not be reached (the message names it and the settings)."""


def connect(quorum: str, session_timeout_s: float, connection_timeout_s: float,
            retry_wait_s: float, max_retries: int) -> Any:
    """A started ``KazooClient``: ``max_retries`` connection attempts ``retry_wait_s`` apart
    (doubling), each waiting up to ``connection_timeout_s``.

    Raises:
        ZooKeeperConnectionException: no attempt connected.
    """
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError
    from kazoo.retry import KazooRetry

    retry = KazooRetry(max_tries=-1, delay=retry_wait_s, backoff=2, max_delay=60)
    client = KazooClient(hosts=quorum, timeout=session_timeout_s, connection_retry=retry,
                         command_retry=KazooRetry(max_tries=max_retries, delay=retry_wait_s))
    wait = retry_wait_s
    for attempt in range(1, max_retries + 1):
        try:
            client.start(timeout=connection_timeout_s)
            return client
        except KazooTimeoutError:
            log.warning("ZooKeeper quorum %s not reachable (attempt %d of %d)", quorum,
                        attempt, max_retries)
            client.stop()
            if attempt < max_retries:
                threading.Event().wait(wait)
                wait *= 2
    client.close()
    raise ZooKeeperConnectionException(
        f"cannot connect to the ZooKeeper quorum {quorum} ({max_retries} attempts of "
        f"{connection_timeout_s:g} s; high-availability.zookeeper.quorum, "
        "high-availability.zookeeper.client.connection-timeout / max-retry-attempts)")


def read_zookeeper_leader(client: Any, base: str) -> LeaderInformation | None:
    """The published leader under ``base`` (None: none, or unreadable)."""
    try:
        data, _ = client.get(f"{base}/leader/connection_info")
        return LeaderInformation.from_json(data.decode())
    except Exception:  # NoNodeError, a connection problem, or not a leader document
        return None


class ZooKeeperLeaderElectionService:
    """See the module docstring. ``client``: a started KazooClient; ``base``: the cluster's
    node (``<path.root>/<cluster-id>``)."""

    def __init__(self, client: Any, base: str) -> None:
        self.client = client
        self.base = base.rstrip("/")
        self._lock = client.Lock(f"{self.base}/latch")
        self._mutex = threading.Lock()
        self._session: str | None = None
        self._stopped = False
        self._contender: LeaderContender | None = None
        self._thread: threading.Thread | None = None

    def start(self, contender: LeaderContender) -> None:
        self._contender = contender
        self.client.add_listener(self._on_connection_state)
        self._thread = threading.Thread(target=self._run, name="zookeeper-leader-election",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._contender is not None
        try:
            acquired = self._lock.acquire(blocking=True)
        except Exception as exc:  # cancelled by stop(), or the connection failed
            if not self._stopped:
                self._contender.handle_error(exc)
            return
        with self._mutex:
            if self._stopped or not acquired:
                return
            self._session = new_session_id()
            session = self._session
        log.info("leadership granted through ZooKeeper %s (session %s)", self.base, session)
        self._contender.grant_leadership(session)

    def _on_connection_state(self, state: Any) -> None:
        """Kazoo's connection listener (its event thread): SUSPENDED or LOST ends leadership."""
        from kazoo.protocol.states import KazooState

        if state == KazooState.CONNECTED:
            return
        with self._mutex:
            if self._session is None or self._stopped:
                return
            self._session = None
        log.warning("ZooKeeper connection %s: leadership given up", state)
        assert self._contender is not None
        self._contender.revoke_leadership()

    def has_leadership(self, session_id: str) -> bool:
        with self._mutex:
            return self._session is not None and self._session == session_id

    def verify_leadership(self, session_id: str, timeout_s: float = 5.0) -> bool:
        """``has_leadership`` confirmed with ZooKeeper itself: connected, and the published
        leader information is this session's. A paused leader whose session expired sees the
        newer leader's node (or none) here, even before kazoo reported the lost connection."""
        from kazoo.protocol.states import KazooState

        if not self.has_leadership(session_id) or self.client.state != KazooState.CONNECTED:
            return False
        try:
            data, _ = self.client.get_async(f"{self.base}/leader/connection_info").get(
                timeout=timeout_s)
            return LeaderInformation.from_json(data.decode()).session_id == session_id
        except Exception as exc:  # no node, a lost connection, a timeout: not (provably) leading
            log.warning("leadership of session %s not confirmed by ZooKeeper: %s", session_id,
                        type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}")
            return False

    def confirm_leadership(self, session_id: str, leader: LeaderInformation) -> bool:
        """Publish ``leader`` (an ephemeral node) if ``session_id`` still leads."""
        if leader.session_id != session_id:
            raise ValueError(f"leader information of session {leader.session_id} confirmed "
                             f"under session {session_id}")
        with self._mutex:
            if self._session != session_id:
                return False
        path = f"{self.base}/leader/connection_info"
        data = leader.to_json().encode()
        if self.client.exists(path):
            self.client.delete(path)
        self.client.create(path, data, ephemeral=True, makepath=True)
        return True

    def stop(self) -> None:
        """Stop competing; a leader withdraws its information and releases the latch."""
        with self._mutex:
            self._stopped = True
            leading, self._session = self._session is not None, None
        self.client.remove_listener(self._on_connection_state)
        try:
            self._lock.cancel()
            if leading:
                current = read_zookeeper_leader(self.client, self.base)
                if current is not None:
                    self.client.delete(f"{self.base}/leader/connection_info")
            self._lock.release()
        except Exception as exc:  # the session may be gone already; its nodes go with it
            log.info("leaving the ZooKeeper election: %s", exc)
        if self._thread is not None:
            self._thread.join(timeout=10)


class ZooKeeperLeaderRetrievalService:
    """Watches ``<base>/leader/connection_info`` and tells ``listener`` of every change."""

    def __init__(self, client: Any, base: str) -> None:
        self.client = client
        self.base = base.rstrip("/")
        self._stopped = False

    def start(self, listener: LeaderRetrievalListener) -> None:
        last: list[Any] = [object()]

        def changed(data: bytes | None, _stat: Any) -> bool:
            if self._stopped:
                return False  # ends the watch
            try:
                leader = None if data is None else LeaderInformation.from_json(data.decode())
            except ValueError:
                leader = None
            if leader != last[0]:
                last[0] = leader
                try:
                    listener.notify_leader_address(leader)
                except Exception as exc:
                    log.exception("leader retrieval listener failed")
                    listener.handle_error(exc)
            return True

        self.client.DataWatch(f"{self.base}/leader/connection_info", changed)

    def stop(self) -> None:
        self._stopped = True
