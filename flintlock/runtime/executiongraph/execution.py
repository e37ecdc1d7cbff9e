"""Execution: one attempt of one subtask, with its checked state machine (Flink ``Execution``).

Every state change goes through ``transition_state``, which checks ``ALLOWED_EXECUTION_TRANSITIONS``,
timestamps the target state, records a story line and raises ``IllegalStateTransition`` (with the
story) for a forbidden move; it never repairs state silently. Runs on the JobMaster's mailbox only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.executiongraph.archived import ArchivedExecution, AttemptIdentity
from flintlock.runtime.executiongraph.story import Story
from flintlock.runtime.ids import AllocationID, ExecutionAttemptID, ResourceID
from flintlock.runtime.jobgraph.types import (
    ALLOWED_EXECUTION_TRANSITIONS,
    ExecutionState,
    IllegalStateTransition,
)
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.taskmanager.task_execution_state import (
    IOMetrics,
    SerializedError,
    TaskResult,
)

__all__ = ["Execution", "SlotAssignment"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlotAssignment:
    """The physical slot an execution was assigned to (Flink ``LogicalSlot`` info)."""

    allocation_id: AllocationID
    resource_id: ResourceID
    task_executor_address: str


class Execution(AttemptIdentity):
    """One attempt of a subtask: id, state with timestamps, slot, result or failure."""

    def __init__(
        self,
        attempt_id: ExecutionAttemptID,
        vertex_name: str,
        parallelism: int,
        now_ms: int,
        story_size: int = 64,
    ) -> None:
        self.attempt_id = attempt_id
        self.vertex_name = vertex_name
        self.parallelism = parallelism
        #: current state
        self.state = ExecutionState.CREATED
        #: epoch ms at which each state was entered
        self.state_timestamps: dict[ExecutionState, int] = {ExecutionState.CREATED: now_ms}
        self.story = Story(story_size)
        self.story.record(now_ms, "created")
        #: the slot, once assigned
        self.slot: SlotAssignment | None = None
        #: the error it FAILED with
        self.failure: SerializedError | None = None
        #: what it produced, once FINISHED
        self.result: TaskResult | None = None
        #: the newest live metrics its TaskExecutor reported while it ran (streaming tasks)
        self.live_metrics: LiveTaskMetrics | None = None
        #: what it processed until it was CANCELED or FAILED, as its task reported at the end
        self.final_io: IOMetrics | None = None
        #: the TaskManager (ResourceID text) that reported it, for error messages
        self.task_manager: str | None = None
        #: (checkpoint id, TaskStateSnapshot) it starts from (Flink ``setInitialState``)
        self.task_restore: tuple[int, Any] | None = None

    def task_name_with_subtask(self) -> str:
        """Flink's ``"<vertex> (<i+1>/<n>)#<attempt>"``."""
        return (
            f"{self.vertex_name} ({self.subtask_index + 1}/{self.parallelism})#{self.attempt_number}"
        )

    def is_terminal(self) -> bool:
        return self.state.is_terminal()

    def location(self) -> str | None:
        if self.task_manager:
            return self.task_manager
        return str(self.slot.resource_id) if self.slot is not None else None

    def transition_state(self, target: ExecutionState, now_ms: int, cause: str = "") -> None:
        """Move to ``target``.

        Raises:
            IllegalStateTransition: ``ALLOWED_EXECUTION_TRANSITIONS`` forbids it.
        """
        source = self.state
        if target not in ALLOWED_EXECUTION_TRANSITIONS[source]:
            self.story.record(now_ms, f"REJECTED {source.name} -> {target.name} {cause}".rstrip())
            raise IllegalStateTransition(
                f"Execution {self.task_name_with_subtask()} ({self.attempt_id})",
                source,
                target,
                str(self.story),
            )
        self.state = target
        self.state_timestamps[target] = now_ms
        self.story.record(now_ms, f"{source.name} -> {target.name} {cause}".rstrip())
        log.info(
            "%s (%s) switched from %s to %s%s",
            self.task_name_with_subtask(),
            self.attempt_id.short(),
            source.name,
            target.name,
            f" ({cause})" if cause else "",
        )

    def archive(self) -> ArchivedExecution:
        return ArchivedExecution(
            attempt_id=self.attempt_id,
            state=self.state,
            task_manager=self.location(),
            state_timestamps={s.name: ts for s, ts in self.state_timestamps.items()},
            failure=self.failure,
            metrics=self.io_metrics(),
            live=self.live_metrics if self.state is ExecutionState.RUNNING else None,
            **_accumulated_ms(self.live_metrics),
        )

    def io_metrics(self) -> IOMetrics:
        """Final counts of a FINISHED attempt; of a CANCELED or FAILED one what its task reported
        at the end, else (a running attempt, or a task that could not report: its TaskManager was
        lost) the last live report."""
        if self.result is not None:
            return self.result.metrics
        return self.final_io if self.final_io is not None else _live_io(self.live_metrics)

    def __repr__(self) -> str:
        return f"<Execution {self.task_name_with_subtask()} {self.state.name}>"


def _accumulated_ms(live: LiveTaskMetrics | None) -> dict[str, float]:
    """The back-pressured and idle ms of the last live report (ArchivedExecution fields)."""
    if live is None:
        return {}
    return {"accumulated_back_pressured_ms": live.accumulated_back_pressured_ms,
            "accumulated_idle_ms": live.accumulated_idle_ms}


def _live_io(live: LiveTaskMetrics | None) -> IOMetrics:
    """The counts of the last live report (what a running or cancelled streaming task did)."""
    return IOMetrics() if live is None else live.io()
