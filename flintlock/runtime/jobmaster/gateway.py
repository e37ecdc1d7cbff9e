"""JobMasterGateway: task state updates, slot offers, heartbeats and job queries of one job.

Follows Flink ``runtime/jobmaster/JobMasterGateway``. One JobMaster runs per job; its address is
given to TaskExecutors with each slot request.
"""

from __future__ import annotations

from typing import Protocol

from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph
from flintlock.runtime.ids import AllocationID, ExecutionAttemptID, JobID, ResourceID
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse
from flintlock.runtime.rpc.messages import Acknowledge
from flintlock.runtime.rpc.service import oneway
from flintlock.runtime.taskexecutor.gateway import SlotOffer
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState

__all__ = ["JobMasterGateway"]


class JobMasterGateway(Protocol):
    async def update_task_execution_state(self, state: TaskExecutionState, *,
                                          timeout: float | None = None) -> Acknowledge:
        """A task changed state (INITIALIZING, RUNNING, FINISHED with result, FAILED with error,
        CANCELED). Unknown attempts are acknowledged and ignored (they belong to an old attempt).
        """
        ...

    async def register_task_manager(
        self, resource_id: ResourceID, task_executor_address: str, *,
        timeout: float | None = None,
    ) -> RegistrationResponse:
        """A TaskExecutor that holds slots for this job connects; heartbeats start. Idempotent."""
        ...

    async def offer_slots(
        self, resource_id: ResourceID, offers: tuple[SlotOffer, ...], *,
        timeout: float | None = None,
    ) -> tuple[SlotOffer, ...]:
        """Offer allocated slots; returns the accepted ones (the rest are to be freed)."""
        ...

    @oneway
    async def fail_slot(self, resource_id: ResourceID, allocation_id: AllocationID, cause: str) -> None:
        """A slot was lost (e.g. freed by its TaskExecutor): fail the tasks running in it."""
        ...

    @oneway
    async def heartbeat_from_task_manager(self, resource_id: ResourceID) -> None:
        """Heartbeat reply from a TaskExecutor connected to this job."""
        ...

    @oneway
    async def update_task_metrics(self, resource_id: ResourceID,
                                  metrics: tuple[LiveTaskMetrics, ...]) -> None:
        """Live metrics of running subtasks on that TaskExecutor (``metrics.live_task_metrics``)."""
        ...

    async def heartbeat_from_resource_manager(self, resource_id: ResourceID) -> None:
        """The ResourceManager's heartbeat request (request-reply: a refused connection counts
        towards ``heartbeat.rpc-failure-threshold``)."""
        ...

    @oneway
    async def notify_not_enough_resources(self, cause: str) -> None:
        """The ResourceManager cannot provide the declared slots, and why (Flink
        ``notifyNotEnoughResourcesAvailable``); a slot request timeout's error then names it."""
        ...

    @oneway
    async def disconnect_task_manager(self, resource_id: ResourceID, cause: str) -> None:
        """A TaskExecutor went away: its slots are lost and their tasks fail."""
        ...

    @oneway
    async def acknowledge_checkpoint(self, job_id: JobID, attempt_id: ExecutionAttemptID,
                                     checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        """A subtask took its snapshot of checkpoint ``checkpoint_id`` (Flink
        ``acknowledgeCheckpoint``)."""
        ...

    @oneway
    async def decline_checkpoint(self, job_id: JobID, attempt_id: ExecutionAttemptID,
                                 checkpoint_id: int, reason: str) -> None:
        """A subtask could not take its snapshot: the checkpoint is aborted."""
        ...

    async def trigger_savepoint(self, target_directory: str | None, cancel_job: bool) -> str:
        """Start a savepoint (under ``target_directory``, else ``state.savepoints.dir``) and
        return its path at once; with ``cancel_job`` the job is cancelled once it completed
        (Flink ``triggerSavepoint``; ``flintlock stop`` uses it). Progress:
        ``savepoint_status``.

        Raises:
            CheckpointException: no directory, not a STREAMING job, or the job is not RUNNING.
        """
        ...

    async def stop_with_savepoint(self, target_directory: str | None, drain: bool) -> str:
        """Stop the job with a savepoint (Flink ``stopWithSavepoint``): the sources emit the
        savepoint's barrier, then nothing more; once it completed they end and the job
        FINISHES, with ``drain`` after MAX_WATERMARK (every window and event-time timer fires
        and is published), without it with no further output (the savepoint holds the open
        windows; output after its barrier is not published). If the savepoint fails the job
        goes on. Returns the savepoint's path at once; progress: ``savepoint_status``.

        Raises:
            CheckpointException: as ``trigger_savepoint``.
        """
        ...

    async def savepoint_status(self, location: str) -> tuple[str, str]:
        """``("IN_PROGRESS" | "COMPLETED" | "FAILED", failure message)`` of a savepoint."""
        ...

    async def request_job(self) -> ArchivedExecutionGraph:
        """A snapshot of the job's ExecutionGraph."""
        ...

    async def request_job_status(self) -> JobStatus:
        """The job's current status."""
        ...

    async def cancel(self) -> Acknowledge:
        """Cancel the job (CANCELLING, then CANCELED). Idempotent; a terminal job is acknowledged."""
        ...
