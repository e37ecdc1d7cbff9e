"""The Dispatcher's high-availability bookkeeping over the JobGraph store and the JobResultStore
(Flink ``Dispatcher``'s ``jobGraphWriter`` / ``jobResultStore`` use and
``SessionDispatcherLeaderProcess``'s recovery).

- Before a job starts, its JobGraph is stored (``persist``); a job that already has a result is
  refused (``is_finished``).
- When a job reached a globally terminal state: a dirty result entry, then its JobGraph removed,
  then the entry marked clean (``job_terminated``).
- A new leader (``recover``) first finishes the cleanup of dirty entries, then runs every stored
  JobGraph without a result; stored graphs that cannot be read fail only their own job. The
  clean entries list the jobs that finished under earlier leaders.

Blocking file I/O; the stores' files are small (a JobGraph, a JSON entry).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobResult
from flintlock.runtime.highavailability.job_event_store import FileSystemJobEventStore
from flintlock.runtime.highavailability.job_graph_store import (
    FileSystemJobGraphStore,
    JobGraphStoreException,
)
from flintlock.runtime.highavailability.job_result_store import (
    FileSystemJobResultStore,
    JobResultEntry,
)
from flintlock.runtime.highavailability.zookeeper_job_graph_store import ZooKeeperJobGraphStore
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus, JobType

__all__ = ["JobPersistence", "RecoveredJobs", "archived_from_entry"]

log = logging.getLogger(__name__)

_STATUS = {"SUCCEEDED": JobStatus.FINISHED, "FAILED": JobStatus.FAILED,
           "CANCELED": JobStatus.CANCELED}


@dataclass
class RecoveredJobs:
    """What a new leader found: JobGraphs to run, stored graphs that cannot be read (job id ->
    why), results of jobs that finished under earlier leaders, and how often each job to run
    has been recovered by a new leader, this one included."""

    job_graphs: list[JobGraph] = field(default_factory=list)
    recoveries: dict[JobID, int] = field(default_factory=dict)
    unreadable: dict[JobID, str] = field(default_factory=dict)
    finished: list[JobResultEntry] = field(default_factory=list)


class JobPersistence:
    """See the module docstring."""

    def __init__(self, job_graphs: FileSystemJobGraphStore | ZooKeeperJobGraphStore,
                 job_results: FileSystemJobResultStore,
                 job_events: FileSystemJobEventStore | None = None) -> None:
        self.job_graphs = job_graphs
        self.job_results = job_results
        #: finished subtasks of BATCH jobs (batch job recovery), removed with the JobGraph
        self.job_events = job_events

    def is_finished(self, job_id: JobID) -> bool:
        return self.job_results.has_job_result_entry(job_id)

    def persist(self, job_graph: JobGraph) -> None:
        """Raises: OSError: the store cannot be written (the submission fails)."""
        self.job_graphs.put_job_graph(job_graph)

    def job_terminated(self, archived: ArchivedExecutionGraph, result: JobResult) -> None:
        """Record a globally terminal job's result and clean up its stored JobGraph."""
        entry = JobResultEntry(archived.job_id, result.application_status,
                               result.net_runtime_ms, archived.name, archived.job_type.name,
                               archived.start_time(), archived.end_time())
        if not self.job_results.has_job_result_entry(entry.job_id):
            self.job_results.create_dirty_result(entry)
        self._clean_up(entry.job_id)

    def _clean_up(self, job_id: JobID) -> None:
        if self.job_events is not None:
            self.job_events.remove(job_id)
        self.job_graphs.remove_job_graph(job_id)
        self.job_results.mark_result_as_clean(job_id)

    def recover(self) -> RecoveredJobs:
        """Finish pending cleanups, then read every stored JobGraph that has no result."""
        recovered = RecoveredJobs()
        for entry in self.job_results.get_dirty_results():
            log.info("finishing the cleanup of job %s (%s)", entry.job_id,
                     entry.application_status)
            self._clean_up(entry.job_id)
        for job_id in self.job_graphs.job_ids():
            if self.job_results.has_job_result_entry(job_id):
                self.job_graphs.remove_job_graph(job_id)  # finished: only its cleanup was left
                continue
            try:
                recovered.job_graphs.append(self.job_graphs.recover_job_graph(job_id))
                recovered.recoveries[job_id] = self.job_graphs.record_recovery(job_id)
            except JobGraphStoreException as exc:
                log.error("job %s cannot be recovered: %s", job_id, exc)
                recovered.unreadable[job_id] = str(exc)
        recovered.finished = self.job_results.get_clean_results()
        return recovered


def archived_from_entry(entry: JobResultEntry) -> tuple[ArchivedExecutionGraph, JobResult]:
    """What REST shows of a job that finished under an earlier leader: its name, type, final
    state and times (no vertices: its ExecutionGraph died with that leader)."""
    state = _STATUS.get(entry.application_status, JobStatus.FAILED)
    timestamps = {}
    if entry.start_time_ms >= 0:
        timestamps["INITIALIZING"] = entry.start_time_ms
    if entry.end_time_ms >= 0:
        timestamps[state.name] = entry.end_time_ms
    job_type = JobType.STREAMING if entry.job_type == "STREAMING" else JobType.BATCH
    archived = ArchivedExecutionGraph(job_id=entry.job_id, name=entry.job_name,
                                      job_type=job_type, state=state,
                                      state_timestamps=timestamps, vertices=())
    return archived, JobResult(entry.job_id, entry.job_name, entry.application_status,
                               entry.net_runtime_ms)
