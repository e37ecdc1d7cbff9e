"""High-availability services built from the configuration (Flink
``HighAvailabilityServicesUtils.createHighAvailabilityServices``).

``high-availability.type``:

- ``NONE``: no services (``create_ha_services`` returns None); a JobManager crash fails its
  jobs, as in Flink.
- ``FILE``: ``file_services`` leader election and retrieval, for JobManagers on one host.
- ``ZOOKEEPER``: ``zookeeper_services`` (kazoo), for JobManagers on several hosts; the job
  stores stay in ``high-availability.storageDir``, which every JobManager must reach.

Every kind keeps its job stores under ``<high-availability.storageDir>/<cluster-id>/``:
``job-graphs/`` (``FileSystemJobGraphStore``) and, unless ``job-result-store.storage-path``
says otherwise, ``<high-availability.storageDir>/job-result-store/<cluster-id>/``
(``FileSystemJobResultStore``), as in Flink.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import (
    HA_CLUSTER_ID,
    HA_STORAGE_DIR,
    HA_TYPE,
    HA_ZK_CONNECTION_TIMEOUT,
    HA_ZK_MAX_RETRIES,
    HA_ZK_QUORUM,
    HA_ZK_RETRY_WAIT,
    HA_ZK_ROOT,
    HA_ZK_SESSION_TIMEOUT,
    JOB_RESULT_STORE_DELETE_ON_COMMIT,
    JOB_RESULT_STORE_PATH,
)
from flintlock.exceptions import FlintlockException
from flintlock.runtime.highavailability.file_services import (
    FileLeaderElectionService,
    FileLeaderRetrievalService,
    read_leader,
)
from flintlock.runtime.highavailability.job_event_store import FileSystemJobEventStore
from flintlock.runtime.highavailability.job_graph_store import FileSystemJobGraphStore
from flintlock.runtime.highavailability.job_managers import (
    FileJobManagerRegistry,
    ZooKeeperJobManagerRegistry,
    describe,
)
from flintlock.runtime.highavailability.job_result_store import FileSystemJobResultStore
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.runtime.highavailability.zookeeper_job_graph_store import ZooKeeperJobGraphStore
from flintlock.runtime.highavailability.zookeeper_services import (
    ZooKeeperLeaderElectionService,
    ZooKeeperLeaderRetrievalService,
    connect,
    read_zookeeper_leader,
)

__all__ = ["HighAvailabilityConfigurationException", "HighAvailabilityServices",
           "create_ha_services"]

_CLUSTER_ID = re.compile(r"^/?[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


class HighAvailabilityConfigurationException(FlintlockException):
    """The high-availability settings are incomplete or invalid (the message says which)."""


@dataclass
class HighAvailabilityServices:
    """The cluster's HA services.

    Attributes:
        kind: ``"FILE"`` or ``"ZOOKEEPER"``.
        directory: the cluster's HA directory (``<storageDir>/<cluster-id>``): the job stores,
            and with FILE the leader's lock and file.
        job_result_store_uri: where job results are kept.
        delete_on_commit: ``job-result-store.delete-on-commit``.
        poll_interval_s: how often file election and retrieval look (s).
        zookeeper: with ZOOKEEPER, (quorum, cluster node, session timeout s, connection timeout
            s, retry wait s, max retries).
        cluster_id: ``high-availability.cluster-id``; storage_dir: ``.storageDir``.
    """

    kind: str
    directory: str
    job_result_store_uri: str
    delete_on_commit: bool = False
    poll_interval_s: float = 0.1
    zookeeper: tuple[str, str, float, float, float, int] | None = None
    cluster_id: str = ""
    storage_dir: str = ""
    _client: Any = field(default=None, repr=False, compare=False)

    def _zookeeper(self) -> tuple[Any, str]:
        """The process's ZooKeeper client (connected on first use) and the cluster's node.

        Raises:
            ZooKeeperConnectionException: the quorum cannot be reached.
        """
        assert self.zookeeper is not None
        quorum, base, session, connection, wait, retries = self.zookeeper
        if self._client is None:
            self._client = connect(quorum, session, connection, wait, retries)
        return self._client, base

    def leader_election_service(self) -> Any:
        """A new election service (one per leadership contest)."""
        if self.kind == "ZOOKEEPER":
            return ZooKeeperLeaderElectionService(*self._zookeeper())
        return FileLeaderElectionService(self.directory, self.poll_interval_s)

    def leader_retrieval_service(self) -> Any:
        if self.kind == "ZOOKEEPER":
            return ZooKeeperLeaderRetrievalService(*self._zookeeper())
        return FileLeaderRetrievalService(self.directory, self.poll_interval_s)

    def current_leader(self) -> LeaderInformation | None:
        """The leader now (one read; None while none is known)."""
        if self.kind == "ZOOKEEPER":
            return read_zookeeper_leader(*self._zookeeper())
        return read_leader(self.directory)

    def check_storage(self) -> None:
        """Create the cluster's HA directory and write (then remove) a probe file in it.

        Raises:
            HighAvailabilityConfigurationException: ``high-availability.storageDir`` cannot be
                written; the message names it and the cause.
        """
        from flintlock.runtime.shuffle.layout import probe_writable

        try:
            probe_writable(self.directory)
        except (OSError, ValueError) as exc:
            raise HighAvailabilityConfigurationException(
                f"high-availability.storageDir {self.storage_dir} cannot be written "
                f"({type(exc).__name__}: {exc}); every JobManager of the cluster must be able "
                "to write there: its job stores (and with FILE the leader's lock) live in "
                f"{self.directory}") from None

    def job_manager_registry(self) -> FileJobManagerRegistry | ZooKeeperJobManagerRegistry:
        """Where JobManager processes announce themselves (``job_managers``)."""
        if self.kind == "ZOOKEEPER":
            return ZooKeeperJobManagerRegistry(*self._zookeeper())
        return FileJobManagerRegistry(self.directory)

    def where(self) -> str:
        """Where the cluster's leadership lives, for messages (a ZooKeeper node or a directory)."""
        if self.zookeeper is not None:
            return f"ZooKeeper {self.zookeeper[0]} node {self.zookeeper[1]}"
        return self.directory

    def describe(self) -> dict[str, Any]:
        """The ``/jobmanager/high-availability`` document (``job_managers.describe``); reads the
        HA store (blocking)."""
        return describe(self.kind, self.cluster_id, self.storage_dir, self.current_leader(),
                        self.job_manager_registry().records())

    def job_graph_store(self) -> FileSystemJobGraphStore | ZooKeeperJobGraphStore:
        """The submitted JobGraphs (files in ``<dir>/job-graphs``; with ZOOKEEPER, pointers to
        them under ``<path.root>/<cluster-id>/jobgraphs``)."""
        files = FileSystemJobGraphStore(f"{self.directory}/job-graphs")
        if self.kind == "ZOOKEEPER":
            return ZooKeeperJobGraphStore(*self._zookeeper(), files)
        return files

    def job_event_store(self) -> FileSystemJobEventStore:
        """Finished subtasks of BATCH jobs (``<dir>/job-events``, batch job recovery)."""
        return FileSystemJobEventStore(f"{self.directory}/job-events")

    def job_result_store(self) -> FileSystemJobResultStore:
        return FileSystemJobResultStore(self.job_result_store_uri, self.delete_on_commit)

    def close(self) -> None:
        """Close the ZooKeeper client (its ephemeral nodes go with its session)."""
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None


def create_ha_services(configuration: Configuration) -> HighAvailabilityServices | None:
    """The configured services, or None without high availability.

    Raises:
        HighAvailabilityConfigurationException: ``high-availability.storageDir`` is missing, the
            cluster id is not a path of plain names, or the type is not available.
    """
    kind = configuration.get(HA_TYPE)
    if kind == "NONE":
        return None
    quorum = configuration.get(HA_ZK_QUORUM)
    if kind == "ZOOKEEPER" and not quorum:
        raise HighAvailabilityConfigurationException(
            "high-availability.type: ZOOKEEPER needs high-availability.zookeeper.quorum, the "
            "ensemble's host:port[,host:port...] (e.g. -D high-availability.zookeeper.quorum="
            "127.0.0.1:2181)")
    storage = configuration.get(HA_STORAGE_DIR)
    if not storage:
        raise HighAvailabilityConfigurationException(
            f"high-availability.type: {kind} needs high-availability.storageDir, a directory "
            "every JobManager of the cluster can write (e.g. -D high-availability.storageDir="
            "/var/lib/flintlock/ha)")
    cluster_id = configuration.get(HA_CLUSTER_ID)
    if not _CLUSTER_ID.match(cluster_id) or ".." in cluster_id.split("/"):
        raise HighAvailabilityConfigurationException(
            f"high-availability.cluster-id {cluster_id!r} must be a path of names made of "
            "letters, digits, '.', '_' and '-' (e.g. /default)")
    storage = storage.rstrip("/")
    if storage.startswith("file://"):
        storage = storage[len("file://"):]
    elif "://" in storage and kind == "FILE":
        raise HighAvailabilityConfigurationException(
            f"high-availability.type: FILE elects the leader with a lock file on this host, so "
            f"high-availability.storageDir must be a local directory, not {storage!r}")
    cluster = cluster_id.strip("/")
    results = configuration.get(JOB_RESULT_STORE_PATH) or f"{storage}/job-result-store/{cluster}"
    zookeeper = None
    if kind == "ZOOKEEPER":
        root = configuration.get(HA_ZK_ROOT).rstrip("/")
        if not root.startswith("/"):
            root = "/" + root
        zookeeper = (str(quorum), f"{root}/{cluster}", configuration.get(HA_ZK_SESSION_TIMEOUT),
                     configuration.get(HA_ZK_CONNECTION_TIMEOUT),
                     configuration.get(HA_ZK_RETRY_WAIT), configuration.get(HA_ZK_MAX_RETRIES))
    return HighAvailabilityServices(kind, f"{storage}/{cluster}", results,
                                    configuration.get(JOB_RESULT_STORE_DELETE_ON_COMMIT),
                                    zookeeper=zookeeper, cluster_id=cluster_id,
                                    storage_dir=storage)
