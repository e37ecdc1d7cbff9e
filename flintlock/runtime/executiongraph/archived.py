"""Read-only snapshots of a job for clients, REST and the web UI.

Follows Flink ``ArchivedExecutionGraph``, ``JobDetails``, ``JobResult`` and the exception history
(``RootExceptionHistoryEntry``). Timestamps are epoch milliseconds; durations are milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.checkpoint.stats import CheckpointStatsSnapshot
from flintlock.runtime.ids import ExecutionAttemptID, JobID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics, SerializedError

__all__ = [
    "ArchivedExecution",
    "ArchivedExecutionGraph",
    "ArchivedJobVertex",
    "AttemptIdentity",
    "ExceptionHistoryEntry",
    "JobDetails",
    "JobResult",
    "RootExceptionHistoryEntry",
    "aggregate_vertex_state",
    "group_exception_history",
]


@dataclass(frozen=True)
class ExceptionHistoryEntry:
    """One failure: the error, when, which task (``"<vertex> (i/n)#a"``) and where.

    ``concurrent`` is True for a failure recorded while a restart of the job was already pending
    (e.g. the other tasks of a lost TaskManager): it belongs to that failover and is listed among
    the ``concurrentExceptions`` of the root entry before it (``group_exception_history``). It
    does not take part in equality.
    """

    error: SerializedError
    timestamp_ms: int
    task_name: str | None = None
    location: str | None = None
    attempt_id: ExecutionAttemptID | None = None
    concurrent: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class RootExceptionHistoryEntry:
    """One failover's failures: the failure that started it and those that joined it.

    Follows Flink ``RootExceptionHistoryEntry`` (an ``ExceptionHistoryEntry`` with its
    ``concurrentExceptions``).
    """

    root: ExceptionHistoryEntry
    concurrent: tuple[ExceptionHistoryEntry, ...] = ()


def group_exception_history(
    entries: Iterable[ExceptionHistoryEntry],
) -> list[RootExceptionHistoryEntry]:
    """Group a flat history (oldest first) into root entries (oldest first).

    Each ``concurrent`` entry joins the root entry before it; one with no root before it (its root
    was dropped from a bounded history) becomes a root itself.
    """
    roots: list[tuple[ExceptionHistoryEntry, list[ExceptionHistoryEntry]]] = []
    for entry in entries:
        if entry.concurrent and roots:
            roots[-1][1].append(entry)
        else:
            roots.append((entry, []))
    return [RootExceptionHistoryEntry(root, tuple(others)) for root, others in roots]


class AttemptIdentity:
    """Subtask index and attempt number read from ``attempt_id`` (live and archived attempts)."""

    attempt_id: ExecutionAttemptID

    @property
    def subtask_index(self) -> int:
        return self.attempt_id.subtask_index

    @property
    def attempt_number(self) -> int:
        return self.attempt_id.attempt_number


@dataclass(frozen=True)
class ArchivedExecution(AttemptIdentity):
    """One attempt of a subtask."""

    attempt_id: ExecutionAttemptID
    state: ExecutionState
    task_manager: str | None
    state_timestamps: Mapping[str, int]
    failure: SerializedError | None = None
    metrics: IOMetrics = field(default_factory=IOMetrics)
    #: live metrics while RUNNING (streaming tasks; ``metrics.live_task_metrics``)
    live: LiveTaskMetrics | None = None
    #: ms spent back-pressured and idle, as of the attempt's last live report (kept after it
    #: ended; 0 for an attempt that never reported, e.g. a batch subtask's one Spark plan)
    accumulated_back_pressured_ms: float = 0.0
    accumulated_idle_ms: float = 0.0

    @property
    def metrics_complete(self) -> bool:
        """Whether ``metrics`` are known: final for an ended attempt, the last live report for a
        running one (Flink ``MutableIOMetrics``: a running attempt's counts are complete when its
        metrics could be fetched; REST ``*-complete``, the dashboards' "loading...")."""
        return self.state.is_terminal() or self.live is not None

    def start_time(self) -> int:
        return self.state_timestamps.get("DEPLOYING", -1)

    def end_time(self) -> int:
        for s in ("FINISHED", "FAILED", "CANCELED"):
            if s in self.state_timestamps:
                return self.state_timestamps[s]
        return -1


def aggregate_vertex_state(states: list[ExecutionState]) -> ExecutionState:
    """Flink ``ExecutionJobVertex.getAggregateJobVertexState`` (fact sheet 1.3)."""
    if not states:
        return ExecutionState.CREATED
    s = set(states)
    if ExecutionState.FAILED in s:
        return ExecutionState.FAILED
    if ExecutionState.CANCELING in s:
        return ExecutionState.CANCELING
    if ExecutionState.CANCELED in s:
        return ExecutionState.CANCELED
    if ExecutionState.INITIALIZING in s:
        return ExecutionState.INITIALIZING
    if ExecutionState.RUNNING in s:
        return ExecutionState.RUNNING
    if ExecutionState.FINISHED in s:
        return ExecutionState.FINISHED if s == {ExecutionState.FINISHED} else ExecutionState.RUNNING
    return ExecutionState.CREATED


@dataclass(frozen=True)
class ArchivedJobVertex:
    """One JobVertex with the current attempt of each subtask and prior attempts;
    ``concurrent_attempts``: speculative attempts running beside the current ones (Flink's other
    current executions of a subtask); ``chained_into``: the vertex it was chained into at run
    time, whose subtasks these are (counted there once in job-wide totals), else None."""

    id: JobVertexID
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str
    subtasks: tuple[ArchivedExecution, ...]
    prior_attempts: tuple[ArchivedExecution, ...] = ()
    concurrent_attempts: tuple[ArchivedExecution, ...] = ()
    chained_into: JobVertexID | None = None

    @property
    def state(self) -> ExecutionState:
        return aggregate_vertex_state([s.state for s in self.subtasks])

    def task_counts(self) -> dict[str, int]:
        counts = {s.name: 0 for s in ExecutionState}
        for sub in self.subtasks:
            counts[sub.state.name] += 1
        return counts

    def metrics(self) -> IOMetrics:
        return summed_io(self.subtasks)


def summed_io(attempts: Iterable[ArchivedExecution]) -> IOMetrics:
    """The attempts' counts added up (a vertex's, or its attempts on one TaskManager)."""
    ios = [a.metrics for a in attempts]
    return IOMetrics(sum(m.records_in for m in ios), sum(m.records_out for m in ios),
                     sum(m.bytes_in for m in ios), sum(m.bytes_out for m in ios))


@dataclass(frozen=True)
class ArchivedExecutionGraph:
    """A job's full state at one moment (for REST ``/jobs/:jobid`` and the CLI progress)."""

    job_id: JobID
    name: str
    job_type: JobType
    state: JobStatus
    state_timestamps: Mapping[str, int]
    vertices: tuple[ArchivedJobVertex, ...]
    plan: Mapping[str, Any] = field(default_factory=dict)
    configuration: Mapping[str, str] = field(default_factory=dict)
    failure: ExceptionHistoryEntry | None = None
    exception_history: tuple[ExceptionHistoryEntry, ...] = ()
    number_of_restarts: int = 0
    pending_slot_requests: int = 0
    #: epoch ms at which the pending restart may begin (once its tasks are cancelled); None
    #: unless the job is RESTARTING
    next_restart_attempt_ms: int | None = None
    #: checkpoint statistics and configuration (``/jobs/:jobid/checkpoints``); None when the job
    #: is BATCH (STREAMING jobs can always take savepoints) or its JobMaster has not started
    checkpoint_stats: CheckpointStatsSnapshot | None = None
    #: how many new JobManager leaders recovered the job (high availability; flintlock's)
    recoveries: int = 0

    def root_exception_history(self) -> list[RootExceptionHistoryEntry]:
        """The failures grouped per failover, oldest first (``group_exception_history`` of the
        history in timestamp order; entries with equal timestamps keep their recorded order)."""
        return group_exception_history(sorted(self.exception_history, key=lambda e: e.timestamp_ms))

    def start_time(self) -> int:
        return self.state_timestamps.get("INITIALIZING", self.state_timestamps.get("CREATED", -1))

    def end_time(self) -> int:
        if not self.state.is_globally_terminal():
            return -1
        return self.state_timestamps.get(self.state.name, -1)

    def details(self, now_ms: int) -> JobDetails:
        counts = {s.name: 0 for s in ExecutionState}
        last = self.start_time()
        for v in self.vertices:
            for sub in v.subtasks:
                counts[sub.state.name] += 1
                if sub.state_timestamps:
                    last = max(last, *sub.state_timestamps.values())
        end = self.end_time()
        start = self.start_time()
        return JobDetails(
            job_id=self.job_id,
            name=self.name,
            start_time=start,
            end_time=end,
            duration=((end if end >= 0 else now_ms) - start) if start >= 0 else 0,
            state=self.state,
            last_modification=max(last, end),
            tasks=counts,
        )


@dataclass(frozen=True)
class JobDetails:
    """One row of ``/jobs/overview``."""

    job_id: JobID
    name: str
    start_time: int
    end_time: int
    duration: int
    state: JobStatus
    last_modification: int
    tasks: Mapping[str, int]


@dataclass(frozen=True)
class JobResult:
    """The outcome of a globally terminal job (Flink ``JobResult``).

    Attributes:
        application_status: ``"SUCCEEDED"``, ``"FAILED"``, ``"CANCELED"`` or ``"UNKNOWN"``.
        net_runtime_ms: from INITIALIZING to the terminal state.
        accumulator_results: name -> bytes (``collect-<uid>`` holds Arrow IPC streams).
        failure: the root cause when FAILED.
    """

    job_id: JobID
    job_name: str
    application_status: str
    net_runtime_ms: int
    accumulator_results: Mapping[str, bytes] = field(default_factory=dict)
    failure: ExceptionHistoryEntry | None = None

    @property
    def is_success(self) -> bool:
        return self.application_status == "SUCCEEDED"
