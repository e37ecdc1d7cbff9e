"""The finished subtasks of running BATCH jobs, kept so a new leader need not run them again
(Flink 1.20's batch job recovery, FLIP-383: ``JobEventStore`` / ``FileSystemJobEventStore``).

With ``execution.batch.job-recovery.enabled`` and high availability, the JobMaster records one
event per FINISHED subtask: its ExecutionVertexID and ``TaskResult`` (where its result partitions
are, its sinks' committables, its metrics). A new leader that recovers the job reads them back
(``finished``) and keeps every subtask whose outputs are still there instead of running it again.

Under the AdaptiveBatchScheduler the JobMaster also records each vertex initialization (the
parallelism and input ranges decided for it, Flink's ``ExecutionJobVertexInitializedEvent``), so
the new leader rebuilds the same dynamic graph before it restores the finished subtasks.

Layout: ``<dir>/<job id>/<job vertex id>-<subtask index>``, one file per subtask, replaced when
the subtask finishes again (after a restart), and ``<dir>/<job id>/init-<sequence>``, one per
initialized vertex in the order of the decisions; each written to a temporary name and moved into
place. The bytes are the RPC codec's pickles, read back through its restricted unpickler (the same
classes a TaskExecutor's FINISHED report carries). Removed with the job's JobGraph.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from flintlock.runtime.ids import ExecutionVertexID, JobID, JobVertexID
from flintlock.runtime.rpc.codec import CodecError, dumps, loads
from flintlock.runtime.shuffle.layout import filesystem_and_path
from flintlock.runtime.taskmanager.task_execution_state import TaskResult

__all__ = ["FileSystemJobEventStore", "VertexInitialization"]

_INIT = "init-"


@dataclass(frozen=True)
class VertexInitialization:
    """A job vertex the AdaptiveBatchScheduler initialized: ``decision`` is its
    ``ParallelismAndInputInfos`` (parallelism, subpartition ranges, input infos, adaptive join
    side and strategy)."""

    job_vertex_id: JobVertexID
    decision: Any

log = logging.getLogger(__name__)


class FileSystemJobEventStore:
    """See the module docstring. ``uri``: the store's directory (a path or a pyarrow URI)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        self._fs, self._dir = filesystem_and_path(self.uri)

    def _job_dir(self, job_id: JobID) -> str:
        return f"{self._dir}/{job_id}"

    def _write(self, job_id: JobID, name: str, payload: bytes) -> None:
        directory = self._job_dir(job_id)
        self._fs.create_dir(directory, recursive=True)
        tmp = f"{directory}/.{name}.{uuid.uuid4().hex[:8]}.tmp"
        with self._fs.open_output_stream(tmp) as out:
            out.write(payload)
        self._fs.move(tmp, f"{directory}/{name}")

    def record_initialization(self, job_id: JobID, sequence: int,
                              initialization: VertexInitialization) -> None:
        """Record the ``sequence``-th vertex initialization of ``job_id`` (0-based).

        Raises:
            OSError: the directory cannot be written.
            CodecError: the decision holds something that cannot be stored.
        """
        self._write(job_id, f"{_INIT}{sequence:06d}", dumps(initialization))

    def initializations(self, job_id: JobID) -> list[VertexInitialization]:
        """The recorded vertex initializations in order, up to the first one missing or
        unreadable (logged): the vertices after it are decided anew."""
        infos = self._fs.get_file_info(pafs.FileSelector(self._job_dir(job_id),
                                                         allow_not_found=True))
        names = sorted(i.base_name for i in infos
                       if i.type == pafs.FileType.File and i.base_name.startswith(_INIT))
        found: list[VertexInitialization] = []
        for expected, name in enumerate(names):
            if name != f"{_INIT}{expected:06d}":
                break
            try:
                with self._fs.open_input_stream(f"{self._job_dir(job_id)}/{name}") as stream:
                    record = loads(stream.read())
                if not (isinstance(record, VertexInitialization)
                        and isinstance(record.job_vertex_id, JobVertexID)):
                    raise CodecError("not a vertex initialization")
            except (OSError, CodecError, ValueError, TypeError) as exc:
                log.warning("job %s: ignoring the vertex initializations from %s on: %s", job_id,
                            name, exc)
                break
            found.append(record)
        return found

    def drop_initializations(self, job_id: JobID, keep: int) -> None:
        """Delete the initialization records from sequence number ``keep`` on."""
        infos = self._fs.get_file_info(pafs.FileSelector(self._job_dir(job_id),
                                                         allow_not_found=True))
        for info in infos:
            name = info.base_name
            if name.startswith(_INIT) and name[len(_INIT):].isdigit() \
                    and int(name[len(_INIT):]) >= keep:
                self._fs.delete_file(info.path)

    def record_finished(self, job_id: JobID, vertex: ExecutionVertexID,
                        result: TaskResult) -> None:
        """Record that ``vertex`` FINISHED with ``result`` (replacing an earlier record).

        Raises:
            OSError: the directory cannot be written.
            CodecError: ``result`` holds something that cannot be stored.
        """
        self._write(job_id, f"{vertex.job_vertex_id}-{vertex.subtask_index}",
                    dumps((vertex, result)))

    def finished(self, job_id: JobID) -> dict[ExecutionVertexID, TaskResult]:
        """The recorded subtasks of ``job_id`` ({} when none); unreadable records are skipped
        (logged): their subtasks simply run again."""
        infos = self._fs.get_file_info(pafs.FileSelector(self._job_dir(job_id),
                                                         allow_not_found=True))
        found: dict[ExecutionVertexID, TaskResult] = {}
        for info in infos:
            if info.type != pafs.FileType.File or info.base_name.startswith((".", _INIT)):
                continue
            try:
                with self._fs.open_input_stream(info.path) as stream:
                    vertex, result = loads(stream.read())
                if not (isinstance(vertex, ExecutionVertexID) and isinstance(result, TaskResult)
                        and isinstance(vertex.job_vertex_id, JobVertexID)):
                    raise CodecError("not a finished-subtask event")
            except (OSError, CodecError, ValueError, TypeError) as exc:
                log.warning("job %s: ignoring the unreadable job event %s: %s", job_id,
                            info.path, exc)
                continue
            found[vertex] = result
        return found

    def remove(self, job_id: JobID) -> None:
        """Forget ``job_id``'s events (no error when there are none)."""
        try:
            self._fs.delete_dir(self._job_dir(job_id))
        except FileNotFoundError:
            pass
