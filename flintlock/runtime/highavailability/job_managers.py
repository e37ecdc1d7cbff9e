"""Which JobManagers of an HA cluster are up, and which of them leads (for REST and the web UI),
and the check that keeps two clusters from sharing one ``high-availability.cluster-id``.

Each JobManager process announces itself once it started, whether it leads or stands by:

- ``ZOOKEEPER``: an ephemeral node ``<path.root>/<cluster-id>/jobmanagers/<id>``; it goes with
  the process's ZooKeeper session.
- ``FILE``: ``<storageDir>/<cluster-id>/jobmanagers/<id>.json``, removed when the process
  stops; a killed process's file is skipped (its pid is gone: FILE is for one host).

Flink keeps no such list (its web UI shows only the JobManager it talks to); the shape served at
``/jobmanager/high-availability`` is flintlock's own (``describe``).

Two clusters, one cluster-id: every announcement carries the cluster's storage directory and a
digest of its ``security.cluster.secret``. A JobManager whose values differ from those of the
JobManagers already up belongs to another cluster; it would contend for their leadership and
its TaskManagers would follow their leader. ``check_same_cluster`` names the conflict instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flintlock.exceptions import FlintlockException
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.runtime.processes import pid_alive

__all__ = ["ClusterIdConflictException", "FileJobManagerRegistry", "JobManagerRecord",
           "ZooKeeperJobManagerRegistry", "check_same_cluster", "describe", "secret_digest"]

log = logging.getLogger(__name__)


class ClusterIdConflictException(FlintlockException):
    """Another cluster's JobManagers use this ``high-availability.cluster-id`` (the message says
    which and what to change)."""


def secret_digest(secret: str | None) -> str:
    """A short digest of the cluster secret: equal secrets give equal digests, the secret itself
    cannot be read back (SHA-256, 16 hex digits; ``""`` without a secret)."""
    if not secret:
        return ""
    return hashlib.sha256(b"flintlock-cluster-id\0" + secret.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JobManagerRecord:
    """One JobManager process of the cluster.

    Attributes:
        id: unique per process start (``<host>-<pid>-<random>``).
        host: its host name; pid: its process id.
        rpc_address: ``host:port`` of its RPC service (the leader's components live there).
        started_ms: when it started (epoch ms).
        storage_dir: its ``high-availability.storageDir``.
        secret: ``secret_digest`` of its cluster secret.
    """

    id: str
    host: str
    pid: int
    rpc_address: str
    started_ms: int
    storage_dir: str
    secret: str = ""

    @classmethod
    def of_this_process(cls, rpc_address: str, storage_dir: str,
                        secret: str | None) -> JobManagerRecord:
        host = socket.gethostname()
        return cls(f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}", host, os.getpid(), rpc_address,
                   int(time.time() * 1000), storage_dir, secret_digest(secret))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobManagerRecord:
        """Raises: ValueError: not a record."""
        try:
            doc = json.loads(text)
            return cls(str(doc["id"]), str(doc["host"]), int(doc["pid"]), str(doc["rpc_address"]),
                       int(doc["started_ms"]), str(doc["storage_dir"]), str(doc.get("secret", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a JobManager record: {text[:200]!r}") from exc


def check_same_cluster(mine: JobManagerRecord, others: list[JobManagerRecord],
                       cluster_id: str, where: str) -> None:
    """Raises ``ClusterIdConflictException`` when a JobManager already up under ``cluster_id``
    (at ``where``) has another storage directory or cluster secret than ``mine``."""
    for other in others:
        differs = [what for what, a, b in (
            ("high-availability.storageDir", mine.storage_dir, other.storage_dir),
            ("security.cluster.secret", mine.secret, other.secret)) if a != b]
        if differs:
            raise ClusterIdConflictException(
                f"high-availability.cluster-id {cluster_id} at {where} is in use by another "
                f"cluster: JobManager {other.id} (RPC {other.rpc_address}) runs there with a "
                f"different {' and '.join(differs)}. Give this cluster its own "
                "high-availability.cluster-id, or stop the other cluster first.")


class FileJobManagerRegistry:
    """``<directory>/jobmanagers/<id>.json`` files (see the module docstring)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory) / "jobmanagers"
        self._mine: Path | None = None

    def records(self) -> list[JobManagerRecord]:
        """The JobManagers up now, oldest first (files of vanished processes are removed)."""
        found = []
        for path in sorted(self.directory.glob("*.json")) if self.directory.exists() else ():
            try:
                record = JobManagerRecord.from_json(path.read_text())
            except (OSError, ValueError):
                continue
            if record.host == socket.gethostname() and not pid_alive(record.pid):
                path.unlink(missing_ok=True)
                continue
            found.append(record)
        return sorted(found, key=lambda r: (r.started_ms, r.id))

    def register(self, record: JobManagerRecord) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{record.id}.json"
        tmp = self.directory / f".{record.id}.tmp"
        tmp.write_text(record.to_json())
        os.replace(tmp, path)
        self._mine = path

    def unregister(self) -> None:
        if self._mine is not None:
            self._mine.unlink(missing_ok=True)
            self._mine = None


class ZooKeeperJobManagerRegistry:
    """Ephemeral ``<base>/jobmanagers/<id>`` nodes (see the module docstring)."""

    def __init__(self, client: Any, base: str) -> None:
        self.client = client
        self.path = f"{base.rstrip('/')}/jobmanagers"
        self._mine: str | None = None

    def records(self) -> list[JobManagerRecord]:
        from kazoo.exceptions import NoNodeError

        found = []
        try:
            children = self.client.get_children(self.path)
        except NoNodeError:
            return []
        for child in children:
            try:
                data, _ = self.client.get(f"{self.path}/{child}")
                found.append(JobManagerRecord.from_json(data.decode()))
            except (NoNodeError, ValueError):  # gone meanwhile, or not ours
                continue
        return sorted(found, key=lambda r: (r.started_ms, r.id))

    def register(self, record: JobManagerRecord) -> None:
        self._mine = f"{self.path}/{record.id}"
        self.client.create(self._mine, record.to_json().encode(), ephemeral=True, makepath=True)

    def unregister(self) -> None:
        if self._mine is not None:
            try:
                self.client.delete(self._mine)
            except Exception as exc:  # the node goes with the session anyway
                log.debug("could not remove %s: %s", self._mine, exc)
            self._mine = None


def describe(kind: str, cluster_id: str, storage_dir: str, leader: LeaderInformation | None,
             records: list[JobManagerRecord]) -> dict[str, Any]:
    """The ``/jobmanager/high-availability`` document::

        {"type": "ZOOKEEPER", "cluster-id": "/default", "storage-dir": "/ha",
         "leader": {"session-id": "...", "rest": "http://...", "rpc-address": "host:port"} | null,
         "jobmanagers": [{"id", "host", "pid", "rpc-address", "started" (epoch ms),
                          "role": "leader" | "standby"}]}
    """
    leader_rpc = _rpc_of(leader)
    return {
        "type": kind, "cluster-id": cluster_id, "storage-dir": storage_dir,
        "leader": None if leader is None else {
            "session-id": leader.session_id, "rest": leader.addresses.get("rest"),
            "rpc-address": leader_rpc},
        "jobmanagers": [{
            "id": r.id, "host": r.host, "pid": r.pid, "rpc-address": r.rpc_address,
            "started": r.started_ms,
            "role": "leader" if r.rpc_address == leader_rpc else "standby"} for r in records],
    }


def _rpc_of(leader: LeaderInformation | None) -> str | None:
    """``host:port`` of the leader's RPC service (from its Dispatcher's address)."""
    if leader is None:
        return None
    address = leader.addresses.get("dispatcher", "")
    if not address.startswith("grpc://"):
        return None
    return address[len("grpc://"):].split("/", 1)[0]
