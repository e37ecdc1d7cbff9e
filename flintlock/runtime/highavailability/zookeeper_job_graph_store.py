"""The JobGraph store with ZooKeeper high availability: the graphs stay in
``high-availability.storageDir``, and ZooKeeper holds a pointer per job (Flink's
``ZooKeeperStateHandleStore`` under ``<path.root>/<cluster-id>/jobgraphs``).

The pointers are the truth: a job is stored once its node exists, and a graph file without a
node (a JobManager died between writing the file and creating the node; its client saw the
submission fail) is not recovered. A node whose file is gone or corrupt is reported, so that job
alone fails. Writing the file first and removing the node first keeps every node pointing at a
whole graph.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from flintlock.runtime.highavailability.job_graph_store import (
    FileSystemJobGraphStore,
    JobGraphStoreException,
)
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph

__all__ = ["ZooKeeperJobGraphStore"]

log = logging.getLogger(__name__)


class ZooKeeperJobGraphStore:
    """``FileSystemJobGraphStore``'s interface, with pointers in ZooKeeper.

    Args:
        client: the process's started KazooClient.
        base: the cluster's node (``<path.root>/<cluster-id>``).
        files: where the graphs themselves are kept.
    """

    def __init__(self, client: Any, base: str, files: FileSystemJobGraphStore) -> None:
        self.client = client
        self.path = f"{base.rstrip('/')}/jobgraphs"
        self.files = files

    def _node(self, job_id: JobID) -> str:
        return f"{self.path}/{job_id}"

    def put_job_graph(self, job_graph: JobGraph) -> None:
        """Store the graph's file, then its pointer.

        Raises:
            OSError: the storage directory cannot be written.
            ZooKeeper errors (kazoo's): the pointer cannot be written.
        """
        self.files.put_job_graph(job_graph)
        data = json.dumps({"file": self.files.describe(job_graph.job_id)}).encode()
        node = self._node(job_graph.job_id)
        if self.client.exists(node):
            self.client.set(node, data)
        else:
            self.client.create(node, data, makepath=True)

    def job_ids(self) -> list[JobID]:
        """The jobs with a pointer (children that are not job ids are ignored)."""
        from kazoo.exceptions import NoNodeError

        try:
            children = self.client.get_children(self.path)
        except NoNodeError:
            return []
        ids = []
        for child in children:
            try:
                ids.append(JobID.from_hex(child))
            except ValueError:
                continue
        return sorted(ids, key=str)

    def recover_job_graph(self, job_id: JobID) -> JobGraph:
        """Raises: JobGraphStoreException: no pointer, or its file is missing or corrupt."""
        if not self.client.exists(self._node(job_id)):
            raise JobGraphStoreException(f"no JobGraph pointer for job {job_id} under {self.path}")
        return self.files.recover_job_graph(job_id)

    def record_recovery(self, job_id: JobID) -> int:
        return self.files.record_recovery(job_id)

    def remove_job_graph(self, job_id: JobID) -> None:
        """Remove the pointer, then the file (no error when they are not there)."""
        from kazoo.exceptions import NoNodeError

        try:
            self.client.delete(self._node(job_id))
        except NoNodeError:
            pass
        self.files.remove_job_graph(job_id)
