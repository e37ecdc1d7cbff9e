"""Events into and commands out of the scheduler core (``DefaultScheduler``).

Events read as facts, commands as orders (STYLE D1). The JobMaster (the async shell) turns RPCs,
timers and finished background work into events, and carries out the commands the core returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateResultPartitionID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError, TaskExecutionState

__all__ = [
    "BlockNodes",
    "CancelJob",
    "CancelTask",
    "CancelTaskFailed",
    "CheckpointFinalized",
    "NotEnoughResources",
    "Command",
    "DeclareResources",
    "DeployTask",
    "DeploymentFailed",
    "Event",
    "FailJob",
    "FinalizeSinks",
    "FreeSlot",
    "GlobalFailure",
    "IdleSlotCheck",
    "JobTerminated",
    "ReleasePartitions",
    "RestartDelayElapsed",
    "ScheduleTimer",
    "SinksFinalized",
    "SlotBatchElapsed",
    "SlotLost",
    "SlotRequestTimeoutCheck",
    "SlowTaskCheck",
    "StartScheduling",
    "TaskExecutionStateChanged",
    "TaskManagerLost",
    "UnblockNodes",
]


# ---- events ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """Base of all scheduler events."""


@dataclass(frozen=True)
class StartScheduling(Event):
    """Sinks are prepared and splits enumerated: job CREATED -> RUNNING, schedule source regions."""

    splits: Mapping[JobVertexID, list[list[Any]]] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskExecutionStateChanged(Event):
    """A TaskExecutor reported a state change of one attempt."""

    state: TaskExecutionState


@dataclass(frozen=True)
class TaskManagerLost(Event):
    """A TaskExecutor disconnected or its heartbeat timed out: its slots and tasks are gone."""

    resource_id: ResourceID
    cause: str


@dataclass(frozen=True)
class SlotLost(Event):
    """One slot was freed by its TaskExecutor (``fail_slot``)."""

    resource_id: ResourceID
    allocation_id: AllocationID
    cause: str


@dataclass(frozen=True)
class _TaskExecutorCallFailed(Event):
    """An RPC to a TaskExecutor about one attempt failed with ``error``."""

    attempt_id: ExecutionAttemptID
    error: SerializedError


@dataclass(frozen=True)
class DeploymentFailed(_TaskExecutorCallFailed):
    """``submit_task`` failed for the attempt."""


@dataclass(frozen=True)
class CancelTaskFailed(_TaskExecutorCallFailed):
    """``cancel_task`` could not reach the TaskExecutor: the attempt counts as cancelled."""


@dataclass(frozen=True)
class CancelJob(Event):
    """The user cancels the job."""


@dataclass(frozen=True)
class FailJob(Event):
    """A global failure (sink preparation, split enumeration, a failed commit)."""

    error: SerializedError


@dataclass(frozen=True)
class GlobalFailure(Event):
    """The job as a whole failed (too many failed checkpoints): restart every vertex by the
    restart strategy, else fail the job."""

    error: SerializedError


@dataclass(frozen=True)
class CheckpointFinalized(Event):
    """A checkpoint finished finalizing: restarts waiting for it may restore now."""


@dataclass(frozen=True)
class SinksFinalized(Event):
    """``FinalizeSinks`` completed; ``error`` set when a commit/abort raised."""

    error: SerializedError | None = None


@dataclass(frozen=True)
class NotEnoughResources(Event):
    """The ResourceManager cannot provide the slots the job waits for, and says why (e.g.
    TaskManagers fail to start); the slot request timeout's error names it."""

    cause: str


@dataclass(frozen=True)
class SlotRequestTimeoutCheck(Event):
    """Timer: check whether slot request bulk ``bulk_id`` has been unfulfillable too long."""

    bulk_id: int


@dataclass(frozen=True)
class SlotBatchElapsed(Event):
    """Timer: ``slot.request.max-interval`` passed since slots were offered that did not yet
    serve every waiting request: match them now."""


@dataclass(frozen=True)
class IdleSlotCheck(Event):
    """Timer: return slots idle longer than ``slot.idle.timeout``."""


@dataclass(frozen=True)
class SlowTaskCheck(Event):
    """Timer: look for slow subtasks (every ``slow-task-detector.check-interval`` at the
    latest). ``generation``: the scheduler runs only the check it scheduled last."""

    generation: int = 0


@dataclass(frozen=True)
class UnblockNodes(Event):
    """Timer: the block of these slow TaskManagers ran out
    (``execution.batch.speculative.block-slow-node-duration``)."""

    resource_ids: tuple[ResourceID, ...]


@dataclass(frozen=True)
class RestartDelayElapsed(Event):
    """Timer: the back-off of pending restart ``restart_id`` elapsed."""

    restart_id: int


# ---- commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """Base of all scheduler commands."""


@dataclass(frozen=True)
class DeclareResources(Command):
    """Tell the ResourceManager which slots the job needs now: (profile, count) pairs."""

    resources: tuple[tuple[Any, int], ...]

    @property
    def number_of_slots(self) -> int:
        return sum(n for _, n in self.resources)

    @classmethod
    def default_slots(cls, n: int) -> DeclareResources:
        """``n`` default (UNKNOWN) slots."""
        from flintlock.runtime.clusterframework.resource_profile import ResourceProfile

        return cls(((ResourceProfile.UNKNOWN, n),) if n else ())


@dataclass(frozen=True)
class _TaskExecutorCommand(Command):
    """An RPC to the TaskExecutor at ``task_executor_address``."""

    task_executor_address: str


@dataclass(frozen=True)
class DeployTask(_TaskExecutorCommand):
    """``TaskExecutorGateway.submit_task(tdd)`` at ``task_executor_address``."""

    tdd: TaskDeploymentDescriptor


@dataclass(frozen=True)
class CancelTask(_TaskExecutorCommand):
    """``TaskExecutorGateway.cancel_task(attempt_id)``."""

    attempt_id: ExecutionAttemptID


@dataclass(frozen=True)
class FreeSlot(_TaskExecutorCommand):
    """``TaskExecutorGateway.free_slot(allocation_id, cause)``."""

    allocation_id: AllocationID
    cause: str


@dataclass(frozen=True)
class ReleasePartitions(_TaskExecutorCommand):
    """``TaskExecutorGateway.release_partitions(job_id, partition_ids)``."""

    partition_ids: tuple[IntermediateResultPartitionID, ...]


@dataclass(frozen=True)
class ScheduleTimer(Command):
    """Feed ``event`` back into the core after ``delay_s`` seconds."""

    delay_s: float
    event: Event


@dataclass(frozen=True)
class FinalizeSinks(Command):
    """Commit (job finished) or abort (failed/cancelled) sinks, off the mailbox; then report
    ``SinksFinalized``. ``work`` is ``(sink, committables in subtask order)`` per sink."""

    commit: bool
    work: tuple[tuple[Any, tuple[Any, ...]], ...]


@dataclass(frozen=True)
class BlockNodes(Command):
    """Tell the ResourceManager that these TaskManagers run slow subtasks: no new slots there
    for ``duration_s`` seconds (Flink ``ResourceManagerGateway.notifyNewBlockedNodes``)."""

    resource_ids: tuple[ResourceID, ...]
    duration_s: float
    cause: str


@dataclass(frozen=True)
class JobTerminated(Command):
    """The job reached a globally terminal state; disconnect and report ``result``."""

    result: JobResult
