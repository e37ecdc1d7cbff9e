"""Submitted JobGraphs kept until their job ended (Flink ``JobGraphStore`` / 2.x
``ExecutionPlanStore`` with its ``FileSystemStateStorageHelper``).

The Dispatcher puts a JobGraph here before it starts the job, and removes it once the job
reached a globally terminal state and its result is in the ``JobResultStore``. A new leader
runs every stored JobGraph that has no result yet. Layout: ``<dir>/submittedJobGraph-<job id>``,
the bytes of ``rest.submission.serialize_job_graph``, written to a temporary name and moved into
place, so a reader never sees half a graph. Works on any pyarrow filesystem (a local path or a
URI). The directory is trusted like the cluster's own files: only JobManagers write to it, and
a read goes through the same restricted unpickler as a REST submission.
"""

from __future__ import annotations

import uuid

import pyarrow.fs as pafs

from flintlock.exceptions import FlintlockException
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.shuffle.layout import filesystem_and_path

__all__ = ["FileSystemJobGraphStore", "JobGraphStoreException"]

PREFIX = "submittedJobGraph-"
#: ``recoveries-<job id>``: how many leaders recovered the job so far (a decimal number)
RECOVERIES = "recoveries-"


class JobGraphStoreException(FlintlockException):
    """A stored JobGraph cannot be read back (missing or corrupt); the message names the file."""


class FileSystemJobGraphStore:
    """See the module docstring. ``uri``: the store's directory (created when missing)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self._fs, self._dir = filesystem_and_path(self.uri)
        self._fs.create_dir(self._dir, recursive=True)

    def _path(self, job_id: JobID) -> str:
        return f"{self._dir}/{PREFIX}{job_id}"

    def describe(self, job_id: JobID) -> str:
        """Where ``job_id``'s graph is kept (the store's URI and file name)."""
        return f"{self.uri}/{PREFIX}{job_id}"

    def put_job_graph(self, job_graph: JobGraph) -> None:
        """Store (or replace) ``job_graph``.

        Raises:
            OSError: the directory cannot be written.
        """
        from flintlock.runtime.rest.submission import serialize_job_graph

        data = serialize_job_graph(job_graph)
        tmp = f"{self._dir}/.{PREFIX}{job_graph.job_id}.{uuid.uuid4().hex[:8]}.tmp"
        with self._fs.open_output_stream(tmp) as out:
            out.write(data)
        self._fs.move(tmp, self._path(job_graph.job_id))

    def recover_job_graph(self, job_id: JobID) -> JobGraph:
        """The stored JobGraph of ``job_id``.

        Raises:
            JobGraphStoreException: it is not there, or its bytes are not a JobGraph.
        """
        from flintlock.runtime.rest.submission import JobGraphDecodeError, deserialize_job_graph

        path = self._path(job_id)
        try:
            with self._fs.open_input_stream(path) as f:
                data = f.read()
        except (FileNotFoundError, OSError) as exc:
            raise JobGraphStoreException(f"the stored JobGraph of job {job_id} cannot be read "
                                         f"from {path}: {exc}") from exc
        try:
            graph = deserialize_job_graph(data)
        except JobGraphDecodeError as exc:
            raise JobGraphStoreException(
                f"the stored JobGraph of job {job_id} at {path} is corrupt ({exc}); the job "
                "cannot be recovered (remove the file to stop seeing this)") from exc
        if graph.job_id != job_id:
            raise JobGraphStoreException(f"{path} holds job {graph.job_id}, not {job_id}")
        return graph

    def job_ids(self) -> list[JobID]:
        """The stored jobs' ids (files that are not a JobGraph's are ignored)."""
        infos = self._fs.get_file_info(pafs.FileSelector(self._dir, allow_not_found=True))
        ids = []
        for info in infos:
            if info.type == pafs.FileType.File and info.base_name.startswith(PREFIX):
                try:
                    ids.append(JobID.from_hex(info.base_name[len(PREFIX):]))
                except ValueError:
                    continue
        return sorted(ids, key=str)

    def record_recovery(self, job_id: JobID) -> int:
        """Count one more recovery of ``job_id`` by a new leader; returns the count (1 the first
        time). Only the leader writes it, so a read-modify-write suffices.

        Raises:
            OSError: the directory cannot be written.
        """
        path = f"{self._dir}/{RECOVERIES}{job_id}"
        try:
            with self._fs.open_input_stream(path) as stream:
                count = int(stream.read().decode() or 0) + 1
        except (FileNotFoundError, ValueError):
            count = 1
        with self._fs.open_output_stream(path) as out:
            out.write(str(count).encode())
        return count

    def remove_job_graph(self, job_id: JobID) -> None:
        """Forget ``job_id``'s graph and recovery count (no error when they are not there)."""
        for path in (self._path(job_id), f"{self._dir}/{RECOVERIES}{job_id}"):
            try:
                self._fs.delete_file(path)
            except FileNotFoundError:
                pass
