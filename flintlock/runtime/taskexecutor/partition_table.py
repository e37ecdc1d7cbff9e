"""PartitionTable: which result partitions a TaskExecutor stored, per job (Flink ``PartitionTable``).

The TaskExecutor records the ``PartitionLocation.uri`` of every partition its FINISHED tasks
reported, so ``release_partitions`` and the end of a job can delete exactly those directories.
Pure bookkeeping; ``delete_partition_uris`` does the (blocking) deletion and is meant to run in a
worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable

from flintlock.runtime.ids import IntermediateResultPartitionID, JobID

__all__ = ["PartitionTable", "delete_partition_uris"]

log = logging.getLogger(__name__)


class PartitionTable:
    """Job -> partition -> storage URIs (one per producing attempt that finished here)."""

    def __init__(self) -> None:
        self._partitions: dict[JobID, dict[IntermediateResultPartitionID, list[str]]] = {}

    def start_tracking(self, job_id: JobID, partition_id: IntermediateResultPartitionID,
                       uri: str) -> None:
        """Remember ``uri``. Partitions that store nothing (empty URI) are tracked too, so the
        job connection stays while the JobMaster may still count on them."""
        uris = self._partitions.setdefault(job_id, {}).setdefault(partition_id, [])
        if uri not in uris:
            uris.append(uri)

    def stop_tracking(self, job_id: JobID,
                      partition_ids: Iterable[IntermediateResultPartitionID]) -> list[str]:
        """Forget the partitions; returns their non-empty URIs (to delete)."""
        by_partition = self._partitions.get(job_id, {})
        uris: list[str] = []
        for partition_id in partition_ids:
            uris.extend(u for u in by_partition.pop(partition_id, []) if u)
        if job_id in self._partitions and not by_partition:
            del self._partitions[job_id]
        return uris

    def stop_tracking_job(self, job_id: JobID) -> list[str]:
        """Forget all partitions of ``job_id``; returns their URIs."""
        by_partition = self._partitions.pop(job_id, {})
        return [uri for uris in by_partition.values() for uri in uris if uri]

    def is_tracking(self, job_id: JobID) -> bool:
        return bool(self._partitions.get(job_id))

    def tracks_any(self) -> bool:
        return any(self._partitions.values())

    def partitions(self, job_id: JobID) -> dict[IntermediateResultPartitionID, list[str]]:
        return {p: list(u) for p, u in self._partitions.get(job_id, {}).items()}


def delete_partition_uris(uris: Iterable[str]) -> list[str]:
    """Delete partition directories (blocking); returns the URIs that could not be deleted.

    Plain paths and ``file://`` URIs are removed with ``shutil``; other schemes (``s3a://``,
    ``hdfs://``) through ``pyarrow.fs``. A missing directory counts as deleted.
    """
    failed: list[str] = []
    for uri in uris:
        try:
            if "://" not in uri or uri.startswith("file://"):
                path = uri[len("file://"):] if uri.startswith("file://") else uri
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)
            else:
                from pyarrow import fs as pafs

                filesystem, path = pafs.FileSystem.from_uri(uri)
                info = filesystem.get_file_info(path)
                if info.type == pafs.FileType.Directory:
                    filesystem.delete_dir(path)
                elif info.type == pafs.FileType.File:
                    filesystem.delete_file(path)
        except Exception as exc:  # report, keep deleting the others
            log.warning("could not delete partition data at %s: %s", uri, exc)
            failed.append(uri)
    return failed
