"""TaskExecutorGateway: how the ResourceManager and JobMasters talk to a TaskExecutor.

Follows Flink ``runtime/taskexecutor/TaskExecutorGateway``. Every request/response method takes a
``timeout`` keyword (seconds) from the transport; ``@oneway`` methods return nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateResultPartitionID,
    JobID,
    ResourceID,
    SlotID,
)
from flintlock.runtime.logs.files import LogChunk, LogInfo
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.rpc.messages import Acknowledge
from flintlock.runtime.rpc.service import oneway
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = [
    "SlotOffer",
    "SlotReport",
    "SlotStatus",
    "TaskExecutorGateway",
]


@dataclass(frozen=True)
class SlotStatus:
    """One slot in a SlotReport: free when ``allocation_id`` is None. ``resource_profile`` is
    the profile it was requested with (``UNKNOWN``: a default slot; free slots are default
    slots). Slots beyond ``taskmanager.numberOfTaskSlots`` are dynamic ones, sized for a slot
    sharing group with resources, and are reported only while allocated."""

    slot_id: SlotID
    allocation_id: AllocationID | None = None
    job_id: JobID | None = None
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN


@dataclass(frozen=True)
class SlotReport:
    """All slots of a TaskExecutor and what they are allocated to (Flink ``SlotReport``), as of
    ``version``: the TaskExecutor's count of slot allocation changes, which ``request_slot``
    also answers with. A report that arrives after a newer ``request_slot`` answer (it was
    built before the allocation, and overtaken) is recognised by its lower version."""

    slots: tuple[SlotStatus, ...]
    version: int = 0

    def free_slots(self) -> int:
        return sum(1 for s in self.slots if s.allocation_id is None)


@dataclass(frozen=True)
class SlotOffer:
    """A slot a TaskExecutor offers to a JobMaster (Flink ``SlotOffer``)."""

    allocation_id: AllocationID
    slot_index: int
    #: the profile the ResourceManager requested it with (UNKNOWN: a default slot)
    resource_profile: ResourceProfile = ResourceProfile.UNKNOWN


class TaskExecutorGateway(Protocol):
    async def request_slot(
        self,
        slot_id: SlotID,
        job_id: JobID,
        allocation_id: AllocationID,
        job_master_address: str,
        resource_profile: ResourceProfile = ResourceProfile.UNKNOWN,
        *,
        timeout: float | None = None,
    ) -> int:
        """Allocate ``slot_id`` for ``job_id`` (ResourceManager -> TaskExecutor); returns the
        slot table's version with the allocation in it (``SlotReport.version``).

        The TaskExecutor marks the slot ALLOCATED, connects to the JobMaster at
        ``job_master_address`` and offers it. Idempotent for the same allocation id.
        ``resource_profile`` UNKNOWN takes a default slot (index below
        ``taskmanager.numberOfTaskSlots``); a known profile creates a dynamic slot of that size
        at the given index (at or above it), as Flink's ``TaskSlotTable`` does.

        Raises:
            SlotAllocationException: the slot is taken by another allocation, unknown, or its
                resources exceed what the TaskExecutor has left.
        """
        ...

    async def submit_task(self, tdd: TaskDeploymentDescriptor) -> Acknowledge:
        """Start the task in its (ACTIVE) slot; the task thread reports its states.

        Raises:
            TaskSubmissionException: no active slot for ``tdd.allocation_id``, or the task exists.
        """
        ...

    async def cancel_task(self, attempt_id: ExecutionAttemptID) -> Acknowledge:
        """Cancel a running task (CANCELING, then CANCELED once its thread ends).

        Idempotent: an unknown or finished attempt is acknowledged.
        """
        ...

    async def free_slot(self, allocation_id: AllocationID, cause: str) -> Acknowledge:
        """Free a slot: fail its remaining tasks, mark it free, tell the ResourceManager."""
        ...

    @oneway
    async def release_partitions(
        self, job_id: JobID, partition_ids: tuple[IntermediateResultPartitionID, ...]
    ) -> None:
        """Delete the stored result partitions (no consumer needs them any more)."""
        ...

    async def can_be_released(self, *, timeout: float | None = None) -> bool:
        """Whether stopping this TaskManager loses nothing a job still needs: no result
        partitions on its local disk (Flink ``TaskExecutorGateway#canBeReleased``)."""
        ...

    async def heartbeat_from_job_manager(self, resource_id: ResourceID, job_id: JobID) -> None:
        """A JobMaster's heartbeat request; the TaskExecutor answers with its own heartbeat.

        A request-reply call, as Flink's ``CompletableFuture<Void> heartbeatFromJobManager``: a
        reply means delivered, and ``RecipientUnreachable`` counts towards
        ``heartbeat.rpc-failure-threshold``."""
        ...

    async def heartbeat_from_resource_manager(self, resource_id: ResourceID) -> None:
        """The ResourceManager's heartbeat request; answered with a SlotReport heartbeat (a
        request-reply call, like ``heartbeat_from_job_manager``)."""
        ...

    @oneway
    async def disconnect_job_manager(self, job_id: JobID, cause: str) -> None:
        """The JobMaster of ``job_id`` is gone: fail the job's tasks, free its slots."""
        ...

    @oneway
    async def disconnect_resource_manager(self, cause: str) -> None:
        """The ResourceManager dropped this TaskExecutor: re-register."""
        ...

    # ---- checkpoints (Flink triggerCheckpoint / confirmCheckpoint / abortCheckpoint) ----------

    async def trigger_checkpoint(self, attempt_id: ExecutionAttemptID, checkpoint_id: int,
                                 timestamp_ms: int, location: str, stop: str = "") -> Acknowledge:
        """Have a running source subtask snapshot and emit barrier ``checkpoint_id``; its state
        goes under ``location``. ``stop`` (``"suspend"`` / ``"terminate"``): a
        stop-with-savepoint's; the source then emits nothing more until the savepoint completed
        (it ends; ``terminate`` drains) or was aborted (it resumes).

        Raises:
            TaskSubmissionException: the attempt is not running here.
        """
        ...

    @oneway
    async def notify_checkpoint_complete(self, attempt_id: ExecutionAttemptID,
                                         checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed (its sink transactions are published)."""
        ...

    @oneway
    async def notify_checkpoint_aborted(self, attempt_id: ExecutionAttemptID,
                                        checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was aborted: stop aligning it."""
        ...

    # ---- logs and metrics (Flink requestLogList / requestFileUploadByName / metric queries) ----

    async def request_log_list(self, *, timeout: float | None = None) -> tuple[LogInfo, ...]:
        """The TaskManager's log files (process log and per-attempt task logs), newest first."""
        ...

    async def request_log(self, name: str | None, start: int, count: int, *,
                          timeout: float | None = None) -> LogChunk:
        """Up to ``count`` bytes (capped at 1 MiB) of log file ``name`` from byte ``start``
        (negative: from the end); ``name`` None reads the process log. Idempotent.

        Raises:
            LogFileNotFoundException: the TaskManager serves no such file (or has no process log).
        """
        ...

    async def request_metrics(self, *,
                              timeout: float | None = None) -> TaskManagerMetricsSnapshot:
        """Process, slot and task metrics of this TaskManager (Flink's metric query service)."""
        ...

    async def request_thread_dump(self, max_depth: int, *,
                                  timeout: float | None = None) -> tuple[ThreadInfo, ...]:
        """The threads of this TaskManager's process with up to ``max_depth`` frames each
        (Flink ``TaskExecutorGateway.requestThreadDump``; ``flintlock.runtime.thread_dump``)."""
        ...
