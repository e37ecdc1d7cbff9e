"""The JobMaster's side of batch job recovery (FLIP-383, ``execution.batch.job-recovery.enabled``):
record each finished subtask of a BATCH job, and on a new leader keep those whose outputs are
still there.

I/O shell around ``highavailability.job_event_store`` (the records) and
``scheduler.batch_recovery`` (the pure decision). Recording runs on the JobMaster's serial I/O
executor, after the subtask's FINISHED report was applied; loading runs in the worker thread that
prepares the job, before scheduling starts.

Under the AdaptiveBatchScheduler the graph is dynamic: each vertex initialization is recorded
too (on the same serial executor, so ahead of its subtasks' FINISHED records). The new leader's
worker thread reads the records and asks storage about every recorded partition and committable
(``read``); on the mailbox, before scheduling starts, the scheduler replays the initializations
and the kept subtasks are chosen on the rebuilt graph from those answers (``replay``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.failover.pipelined_regions import PipelinedRegions
from flintlock.runtime.highavailability.job_event_store import (
    FileSystemJobEventStore,
    VertexInitialization,
)
from flintlock.runtime.ids import ExecutionVertexID, JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.scheduler.batch_recovery import restorable_subtasks
from flintlock.runtime.shuffle.layout import filesystem_and_path
from flintlock.runtime.taskexecutor.partition_table import delete_partition_uris
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState, TaskResult

__all__ = ["BatchJobEvents", "RecordedBatchJob"]

log = logging.getLogger(__name__)

RunIo = Callable[[Callable[[], Any], Callable[[Any, BaseException | None], Any]], None]


@dataclass
class RecordedBatchJob:
    """What an earlier leader recorded of a job, with storage's answers about it (``read``)."""

    initializations: list[VertexInitialization] = field(default_factory=list)
    finished: dict[ExecutionVertexID, TaskResult] = field(default_factory=dict)
    #: partition URI -> whether it can still be read
    partitions: dict[str, bool] = field(default_factory=dict)
    #: (subtask, sink index) -> whether its committable is still there
    committables: dict[tuple[ExecutionVertexID, int], bool] = field(default_factory=dict)


class BatchJobEvents:
    """Records and restores the finished subtasks of one BATCH job.

    Args:
        store: the HA storage's job events.
        job_graph: the job (its sinks judge whether their committables are still there).
    """

    def __init__(self, store: FileSystemJobEventStore, job_graph: JobGraph,
                 shuffle_dir: str = "") -> None:
        self.store = store
        self.job_graph = job_graph
        #: the shared ``shuffle.storage-dir`` ("" when TaskManagers keep partitions locally)
        self.shuffle_dir = shuffle_dir
        self.job_id: JobID = job_graph.job_id
        #: how many subtasks the last ``load`` restored, and how many it found recorded
        self.restored = self.recorded = 0
        #: the restored subtasks' partitions: no TaskExecutor tracks them any more, so the
        #: JobMaster deletes them when the job ends (``release_restored_partitions``)
        self.restored_partitions: list[str] = []
        #: vertex initializations recorded so far (the next one's sequence number)
        self.initializations = 0
        self._run_io: RunIo | None = None

    def record_initializations(self, scheduler: Any, run_io: RunIo) -> None:
        """Record every vertex initialization ``scheduler`` (an AdaptiveBatchScheduler) makes
        from now on, in order, on the JobMaster's serial I/O executor."""
        self._run_io = run_io
        scheduler.on_initialized = self._on_initialized

    def _on_initialized(self, vertex_id: Any, decision: Any) -> None:
        sequence, self.initializations = self.initializations, self.initializations + 1
        record = VertexInitialization(vertex_id, decision)

        def done(_: Any, error: BaseException | None) -> None:
            if error is not None:  # a new leader decides this vertex (and those after) anew
                log.warning("job %s: recording the initialization of vertex %s failed: %s",
                            self.job_id, vertex_id, error)

        assert self._run_io is not None
        self._run_io(lambda: self.store.record_initialization(self.job_id, sequence, record), done)

    def on_report(self, graph: ExecutionGraph, report: TaskExecutionState, run_io: RunIo) -> None:
        """Mailbox, after ``report`` was applied: record the subtask if it is now FINISHED."""
        execution = graph.find_current_execution(report.attempt_id)
        if (report.state is not ExecutionState.FINISHED or execution is None
                or execution.state is not ExecutionState.FINISHED or report.result is None):
            return
        vertex, result = report.attempt_id.execution_vertex_id, report.result

        def done(_: Any, error: BaseException | None) -> None:
            if error is not None:  # the subtask runs again after a failover: nothing is lost
                log.warning("job %s: recording that %s finished failed: %s", self.job_id,
                            execution.task_name_with_subtask(), error)

        run_io(lambda: self.store.record_finished(self.job_id, vertex, result), done)

    def load(self, graph: ExecutionGraph,
             regions: PipelinedRegions) -> dict[ExecutionVertexID, TaskResult]:
        """Worker thread: the recorded subtasks to restore as FINISHED (``restorable_subtasks``)
        of a static graph."""
        return self.restore(graph, regions, self.read(with_initializations=False))

    def read(self, with_initializations: bool = True) -> RecordedBatchJob:
        """Worker thread: the records, and whether each recorded partition and committable is
        still there (the only I/O of a recovery)."""
        finished = self.store.finished(self.job_id)
        return RecordedBatchJob(
            self.store.initializations(self.job_id) if with_initializations else [], finished,
            {p.uri: _partition_present(p) for r in finished.values() for p in r.partitions},
            {(v, i): self._committable_present(v, i, c) for v, r in finished.items()
             for i, c in r.committables.items()})

    def replay(self, scheduler: Any, splits: Mapping[Any, list[list[Any]]],
               recorded: RecordedBatchJob) -> dict[ExecutionVertexID, TaskResult]:
        """Mailbox, before scheduling starts: rebuild the dynamic graph as the earlier leader
        decided it (``AdaptiveBatchScheduler.replay_initializations``), then the subtasks to
        restore. Initialization records after the last one replayed are dropped (the vertices
        from there on are decided anew, and recorded under those numbers)."""
        replayed = scheduler.replay_initializations(
            splits, [(r.job_vertex_id, r.decision) for r in recorded.initializations])
        self.initializations = len(replayed)
        if len(replayed) < len(recorded.initializations) and self._run_io is not None:
            keep = len(replayed)

            def dropped(_: Any, error: BaseException | None) -> None:
                if error is not None:
                    log.warning("job %s: dropping stale initializations failed: %s",
                                self.job_id, error)

            self._run_io(lambda: self.store.drop_initializations(self.job_id, keep), dropped)
        if replayed:
            log.info("job %s: batch job recovery rebuilt %d vertices as an earlier leader decided "
                     "them", self.job_id, len(replayed))
        return self.restore(scheduler.graph, scheduler.regions, recorded)

    def restore(self, graph: ExecutionGraph, regions: PipelinedRegions,
                recorded: RecordedBatchJob) -> dict[ExecutionVertexID, TaskResult]:
        """The recorded subtasks to restore as FINISHED on ``graph``, from ``recorded``'s
        answers (no I/O)."""
        finished = recorded.finished
        kept = restorable_subtasks(
            graph, regions, finished, lambda p: recorded.partitions.get(p.uri, False),
            lambda v, i, _c: recorded.committables.get((v, i), False)) if finished else {}
        self.recorded, self.restored = len(finished), len(kept)
        self.restored_partitions = [p.uri for r in kept.values() for p in r.partitions]
        if finished:
            total = sum(1 for _ in graph.execution_vertices())
            log.info("job %s: batch job recovery keeps %d of its %d subtasks (%d recorded as "
                     "finished by an earlier leader); %d run again", self.job_id, len(kept),
                     total, len(finished), total - len(kept))
        return kept

    def release_restored_partitions(self, check_leadership: Callable[[], None]) -> None:
        """I/O executor, once the job ended: delete the restored partitions and the job's
        directory on the shared shuffle storage (partitions of JobMasters that TaskManagers
        lost are kept there for recovery), unless this JobManager no longer leads (the newer
        leader may be keeping them)."""
        uris = list(self.restored_partitions)
        if self.shuffle_dir:
            uris.append(f"{self.shuffle_dir.rstrip('/')}/{self.job_id}")
        if uris:
            check_leadership()
            failed = delete_partition_uris(uris)
            if failed:
                log.warning("job %s: could not delete the restored partitions %s", self.job_id,
                            failed)

    def fully_restored(self, kept: dict[ExecutionVertexID, TaskResult], vertex: Any) -> bool:
        """Whether every subtask of job vertex ``vertex`` is among ``kept`` (its sinks then need
        no preparation: their output is staged, or being published)."""
        return all(ExecutionVertexID(vertex.id, i) in kept for i in range(vertex.parallelism))

    @staticmethod
    def fully_recorded(recorded: RecordedBatchJob, vertex: Any) -> bool:
        """Before a dynamic graph is rebuilt: whether every subtask of ``vertex`` (at its
        recorded parallelism) finished with its committables still there, so its sinks are not
        prepared again."""
        parallelism = next((r.decision.parallelism for r in recorded.initializations
                            if r.job_vertex_id == vertex.id),
                           vertex.parallelism if vertex.parallelism_configured else None)
        if parallelism is None:
            return False  # sized at run time, and no decision recorded
        subtasks = [ExecutionVertexID(vertex.id, i) for i in range(parallelism)]
        return all(v in recorded.finished and all(
            recorded.committables.get((v, i), False) for i in recorded.finished[v].committables)
            for v in subtasks)

    def _committable_present(self, vertex: ExecutionVertexID, sink_index: int,
                             committable: object) -> bool:
        sinks = next((v.sinks for v in self.job_graph.vertices if v.id == vertex.job_vertex_id), ())
        present = getattr(sinks[sink_index], "committable_present", None) \
            if sink_index < len(sinks) else None
        return bool(present(committable)) if present is not None else False


def _partition_present(location: PartitionLocation) -> bool:
    """Whether a finished partition can still be read: on shared storage (a TaskManager's own
    disk is not trusted after a failover) and its directory exists."""
    if location.stores_local_resources_on is not None:
        return False
    try:
        fs, path = filesystem_and_path(location.uri)
        return fs.get_file_info(path).type == pafs.FileType.Directory
    except (OSError, ValueError):
        return False
