"""High-availability services built from the configuration (Flink
``HighAvailabilityServicesUtils.createHighAvailabilityServices``).

``high-availability.type``:

- ``NONE``: no services (``create_ha_services`` returns None); a JobManager crash fails its
  jobs, as in Flink.
- ``FILE``: ``file_services`` leader election and retrieval, for JobManagers on one host.
- ``ZOOKEEPER``: not built yet; refused with a clear error.

Every kind keeps its job stores under ``<high-availability.storageDir>/<cluster-id>/``:
``job-graphs/`` (``FileSystemJobGraphStore``) and, unless ``job-result-store.storage-path``
says otherwise, ``<high-availability.storageDir>/job-result-store/<cluster-id>/``
(``FileSystemJobResultStore``), as in Flink.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flintlock.config import Configuration
from flintlock.config.options import (
    HA_CLUSTER_ID,
    HA_STORAGE_DIR,
    HA_TYPE,
    JOB_RESULT_STORE_DELETE_ON_COMMIT,
    JOB_RESULT_STORE_PATH,
)
from flintlock.exceptions import FlintlockException
from flintlock.runtime.highavailability.file_services import (
    FileLeaderElectionService,
    FileLeaderRetrievalService,
)
from flintlock.runtime.highavailability.job_graph_store import FileSystemJobGraphStore
from flintlock.runtime.highavailability.job_result_store import FileSystemJobResultStore

__all__ = ["HighAvailabilityConfigurationException", "HighAvailabilityServices",
           "create_ha_services"]

_CLUSTER_ID = re.compile(r"^/?[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


class HighAvailabilityConfigurationException(FlintlockException):
    """The high-availability settings are incomplete or invalid (the message says which)."""


@dataclass(frozen=True)
class HighAvailabilityServices:
    """The cluster's HA services.

    Attributes:
        kind: ``"FILE"``.
        directory: the cluster's HA directory (``<storageDir>/<cluster-id>``).
        job_result_store_uri: where job results are kept.
        delete_on_commit: ``job-result-store.delete-on-commit``.
        poll_interval_s: how often file election and retrieval look (s).
    """

    kind: str
    directory: str
    job_result_store_uri: str
    delete_on_commit: bool = False
    poll_interval_s: float = 0.1

    def leader_election_service(self) -> FileLeaderElectionService:
        return FileLeaderElectionService(self.directory, self.poll_interval_s)

    def leader_retrieval_service(self) -> FileLeaderRetrievalService:
        return FileLeaderRetrievalService(self.directory, self.poll_interval_s)

    def job_graph_store(self) -> FileSystemJobGraphStore:
        return FileSystemJobGraphStore(f"{self.directory}/job-graphs")

    def job_result_store(self) -> FileSystemJobResultStore:
        return FileSystemJobResultStore(self.job_result_store_uri, self.delete_on_commit)


def create_ha_services(configuration: Configuration) -> HighAvailabilityServices | None:
    """The configured services, or None without high availability.

    Raises:
        HighAvailabilityConfigurationException: ``high-availability.storageDir`` is missing, the
            cluster id is not a path of plain names, or the type is not available.
    """
    kind = configuration.get(HA_TYPE)
    if kind == "NONE":
        return None
    if kind == "ZOOKEEPER":
        raise HighAvailabilityConfigurationException(
            "high-availability.type: ZOOKEEPER is not available yet; use FILE for JobManagers "
            "on one host (high-availability.type: FILE with high-availability.storageDir)")
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
    elif "://" in storage:
        raise HighAvailabilityConfigurationException(
            f"high-availability.type: FILE elects the leader with a lock file on this host, so "
            f"high-availability.storageDir must be a local directory, not {storage!r}")
    cluster = cluster_id.strip("/")
    results = configuration.get(JOB_RESULT_STORE_PATH) or f"{storage}/job-result-store/{cluster}"
    return HighAvailabilityServices(kind, f"{storage}/{cluster}", results,
                                    configuration.get(JOB_RESULT_STORE_DELETE_ON_COMMIT))
