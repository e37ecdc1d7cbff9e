"""A TaskManager's metrics: its tasks' I/O and busy time, its slots and its process.

``TaskMetricStore`` is the TaskExecutor's record of the latest attempt of every subtask it ran
(a pure state core, fed from the TaskExecutor's mailbox); ``TaskManagerMetricsSnapshot`` is what
``TaskExecutorGateway.request_metrics`` returns (for REST ``/taskmanagers/:id/metrics`` and the
Prometheus endpoint). Finished subtasks stay until ``max_entries`` newer ones pushed them out, so a
scrape after a batch job still sees its counts (Flink drops a task's metrics when it ends; its
counts would then never be visible for a batch job that runs between two scrapes).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace

from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.ids import ExecutionAttemptID, JobID
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.metrics.process import ProcessStats, process_metric_values
from flintlock.runtime.metrics.task_metrics import attempt_metrics
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

__all__ = [
    "DEFAULT_MAX_TASK_ENTRIES",
    "TaskManagerMetricsSnapshot",
    "TaskMetricSample",
    "TaskMetricStore",
    "task_manager_metric_values",
]

#: subtasks a TaskManager keeps metrics of (oldest dropped first)
DEFAULT_MAX_TASK_ENTRIES = 4096

_SubtaskKey = tuple[str, str, int]


@dataclass(frozen=True)
class TaskMetricSample:
    """The latest attempt of one subtask on this TaskManager.

    Attributes:
        job_id, job_name: the job.
        task_id, task_name: the JobVertex id (32 hex) and name (chained operator names).
        subtask_index, attempt_number: which subtask and attempt.
        state: the attempt's last known state.
        io: its I/O metrics (what it processed, once it ended).
        running_since_ms: epoch ms it entered RUNNING (0: never).
        ended_ms: epoch ms it left RUNNING for good (CANCELING or terminal; 0: not yet).
        live: its newest live report while RUNNING (``live_task_metrics``: counts so far, rates).
    """

    job_id: str
    job_name: str
    task_id: str
    task_name: str
    subtask_index: int
    attempt_number: int
    state: ExecutionState
    io: IOMetrics = IOMetrics()
    running_since_ms: int = 0
    ended_ms: int = 0
    live: LiveTaskMetrics | None = None

    def metrics(self, now_ms: int) -> dict[str, float]:
        """Flink's task metric name -> value (``task_metrics.TASK_METRICS``, and
        ``LIVE_TASK_METRICS`` while a live report is there)."""
        timestamps = {"RUNNING": self.running_since_ms}
        if self.ended_ms:  # set with CANCELING or a terminal state
            timestamps[self.state.name] = self.ended_ms
        live = self.live if self.state is ExecutionState.RUNNING else None
        return attempt_metrics(self.io, self.state, timestamps, now_ms, live)


@dataclass(frozen=True)
class TaskManagerMetricsSnapshot:
    """Everything a TaskManager reports about itself at ``now_ms`` (epoch ms).

    ``status`` holds Flink's ``Status.*`` metrics of the TaskManager (its embedded Spark JVM's,
    else its Python process mapped onto them: ``taskexecutor.process_status``)."""

    resource_id: str
    now_ms: int
    process: ProcessStats
    slots_total: int
    slots_available: int
    running_tasks: int
    tasks: tuple[TaskMetricSample, ...] = ()
    status: dict[str, float] = field(default_factory=dict)


def task_manager_metric_values(snapshot: TaskManagerMetricsSnapshot) -> dict[str, float]:
    """REST ``/taskmanagers/:id/metrics`` names -> values: ``Status.*`` (Flink's names),
    ``Status.Python.*`` (its Python process), ``taskSlotsTotal``, ``taskSlotsAvailable``,
    ``numRunningTasks``."""
    return {
        **snapshot.status,
        **process_metric_values(snapshot.process),
        "taskSlotsTotal": float(snapshot.slots_total),
        "taskSlotsAvailable": float(snapshot.slots_available),
        "numRunningTasks": float(snapshot.running_tasks),
    }


class TaskMetricStore:
    """Latest attempt per subtask ``(job, vertex, subtask index)``, bounded by ``max_entries``."""

    def __init__(self, max_entries: int = DEFAULT_MAX_TASK_ENTRIES) -> None:
        self._max_entries = max(1, max_entries)
        self._samples: OrderedDict[_SubtaskKey, TaskMetricSample] = OrderedDict()

    @staticmethod
    def _key(job_id: JobID | str, attempt_id: ExecutionAttemptID) -> _SubtaskKey:
        return str(job_id), str(attempt_id.job_vertex_id), attempt_id.subtask_index

    def task_deployed(self, tdd: TaskDeploymentDescriptor) -> None:
        """A new attempt arrived (it replaces an older attempt of the same subtask)."""
        key = self._key(tdd.job_id, tdd.attempt_id)
        old = self._samples.get(key)
        if old is not None and old.attempt_number > tdd.attempt_id.attempt_number:
            return
        self._samples[key] = TaskMetricSample(
            job_id=str(tdd.job_id), job_name=tdd.job_name, task_id=str(tdd.attempt_id.job_vertex_id),
            task_name=tdd.vertex_name, subtask_index=tdd.attempt_id.subtask_index,
            attempt_number=tdd.attempt_id.attempt_number, state=ExecutionState.DEPLOYING,
        )
        self._samples.move_to_end(key)
        while len(self._samples) > self._max_entries:
            self._samples.popitem(last=False)

    def task_state_changed(self, job_id: JobID, attempt_id: ExecutionAttemptID,
                           state: ExecutionState, io: IOMetrics | None, now_ms: int) -> None:
        """Record a state change (``io`` with FINISHED, CANCELED and FAILED: what the attempt
        processed); unknown or older attempts are ignored."""
        key = self._key(job_id, attempt_id)
        sample = self._samples.get(key)
        if sample is None or sample.attempt_number != attempt_id.attempt_number:
            return
        changes: dict[str, object] = {"state": state}
        if state is ExecutionState.RUNNING and not sample.running_since_ms:
            changes["running_since_ms"] = now_ms
        if (state is ExecutionState.CANCELING or state.is_terminal()) and not sample.ended_ms:
            changes["ended_ms"] = now_ms
        if io is not None:
            changes["io"] = io
        elif state.is_terminal() and sample.live is not None:  # what it last reported
            changes["io"] = sample.live.io()
        self._samples[key] = replace(sample, **changes)  # type: ignore[arg-type]

    def live_metrics_reported(self, job_id: JobID, live: LiveTaskMetrics) -> None:
        """Keep a running attempt's newest live report (``LiveMetricsPusher``); reports of
        unknown, older or no longer running attempts are ignored."""
        key = self._key(job_id, live.attempt_id)
        sample = self._samples.get(key)
        if (sample is not None and sample.attempt_number == live.attempt_id.attempt_number
                and sample.state is ExecutionState.RUNNING):
            self._samples[key] = replace(sample, live=live)

    def samples(self) -> tuple[TaskMetricSample, ...]:
        return tuple(self._samples.values())

    def __len__(self) -> int:
        return len(self._samples)
