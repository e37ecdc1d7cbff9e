"""DispatcherGateway: submit, list, query and cancel jobs (what REST and clients call).

Follows Flink ``runtime/dispatcher/DispatcherGateway`` and ``RestfulGateway``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobDetails, JobResult
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.logs.files import LogChunk, LogInfo
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.gateway import ResourceOverview, TaskManagerInfo
from flintlock.runtime.rpc.messages import Acknowledge
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = ["ClusterOverview", "DispatcherGateway"]


@dataclass(frozen=True)
class ClusterOverview:
    """REST ``/overview``: resources plus jobs by state."""

    resources: ResourceOverview
    jobs_running: int
    jobs_finished: int
    jobs_cancelled: int
    jobs_failed: int


class DispatcherGateway(Protocol):
    async def submit_job(self, job_graph: JobGraph) -> Acknowledge:
        """Accept a job and start its JobMaster.

        Raises:
            DuplicateJobSubmissionException: the job id is running or already finished.
            JobSubmissionException: the JobGraph is invalid (the message says why).
        """
        ...

    async def list_jobs(self) -> tuple[JobDetails, ...]:
        """Every job the Dispatcher knows (running and completed), newest first."""
        ...

    async def request_job(self, job_id: JobID) -> ArchivedExecutionGraph:
        """Snapshot of one job. Raises ``FlinkJobNotFoundException`` for an unknown id."""
        ...

    async def request_job_status(self, job_id: JobID) -> JobStatus:
        """Raises ``FlinkJobNotFoundException`` for an unknown id."""
        ...

    async def request_job_result(self, job_id: JobID, timeout_s: float = 0.0, *,
                                 timeout: float | None = None) -> JobResult | None:
        """The JobResult once the job is globally terminal, else ``None``; with ``timeout_s``
        (s), waits up to that long for it (a blocking query) before answering ``None``.

        Raises ``FlinkJobNotFoundException`` for an unknown id.
        """
        ...

    async def cancel_job(self, job_id: JobID) -> Acknowledge:
        """Cancel a job. Idempotent on terminal jobs; unknown id -> ``FlinkJobNotFoundException``."""
        ...

    async def deliver_coordination_request(self, job_id: JobID, operator_id: str,
                                           request: dict[str, Any]) -> dict[str, Any]:
        """A collect client's request to the collect coordinator of sink ``operator_id``
        (``{"offset": n}`` -> ``CollectResponse`` JSON plus ``jobStatus``); see
        ``collect_coordinator``."""
        ...

    async def trigger_savepoint(self, job_id: JobID, target_directory: str | None,
                                cancel_job: bool) -> str:
        """Start a savepoint (``target_directory`` or ``state.savepoints.dir``; cancel the job
        after it with ``cancel_job``); returns a trigger id at once. Unknown job ->
        ``FlinkJobNotFoundException``."""
        ...

    async def stop_with_savepoint(self, job_id: JobID, target_directory: str | None,
                                  drain: bool) -> str:
        """Stop the job with a savepoint (``JobMasterGateway.stop_with_savepoint``: it
        FINISHES, after MAX_WATERMARK with ``drain``); a trigger id at once, as
        ``trigger_savepoint``. Unknown job -> ``FlinkJobNotFoundException``."""
        ...

    async def savepoint_status(self, job_id: JobID, trigger_id: str) -> dict[str, Any]:
        """``{"status": {"id": "IN_PROGRESS" | "COMPLETED"}, "operation": {"location"} |
        {"failure-cause": {...}} | None}`` (Flink's ``AsynchronousOperationResult``); unknown
        trigger id -> ``UnknownOperationException``."""
        ...

    async def request_cluster_overview(self) -> ClusterOverview:
        """Counts of TaskManagers, slots and jobs by state."""
        ...

    async def request_task_manager_infos(self) -> tuple[TaskManagerInfo, ...]:
        """The registered TaskManagers (forwarded to the ResourceManager)."""
        ...

    async def shutdown_cluster(self) -> Acknowledge:
        """Stop the cluster (REST ``DELETE /cluster``)."""
        ...

    async def request_task_manager_log_list(self, resource_id: ResourceID) -> tuple[LogInfo, ...]:
        """A TaskManager's log files (forwarded to the ResourceManager).

        Raises:
            UnknownTaskExecutorException: no such TaskManager.
        """
        ...

    async def request_task_manager_log(self, resource_id: ResourceID, name: str | None,
                                       start: int, count: int) -> LogChunk:
        """A chunk of a TaskManager's log file (``name`` None: its process log).

        Raises:
            UnknownTaskExecutorException: no such TaskManager.
            LogFileNotFoundException: it serves no such file.
        """
        ...

    async def request_task_manager_metrics(self, resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        """A TaskManager's metrics. Raises ``UnknownTaskExecutorException`` for an unknown id."""
        ...

    async def request_task_manager_thread_dump(self, resource_id: ResourceID,
                                               max_depth: int) -> tuple[ThreadInfo, ...]:
        """A TaskManager's thread dump (forwarded to the ResourceManager). Raises
        ``UnknownTaskExecutorException`` for an unknown id."""
        ...
