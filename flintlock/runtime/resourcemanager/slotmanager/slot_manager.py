"""SlotManager: executes the SlotTracker's decisions (Flink ``DeclarativeSlotManager`` shell).

Lives inside the ResourceManager and runs only in its mailbox. It feeds events to the pure
``SlotTracker`` and turns each ``AllocateSlot`` command into ``TaskExecutorGateway.request_slot``
(started with ``run_async``; the reply comes back to the mailbox). A failed request frees the slot
and re-checks the requirements after ``retry_delay_s`` (Flink
``slotmanager.requirement-check.delay``), so a refusing TaskExecutor is not hammered; so does a
slot freed by its TaskExecutor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.resourcemanager.slotmanager.slot_tracker import (
    AllocateSlot,
    RequirementsCheck,
    SlotFreed,
    SlotRequestAcknowledged,
    SlotRequestFailed,
    SlotTracker,
    SlotTrackerEvent,
)
from flintlock.runtime.rpc.endpoint import RpcEndpoint
from flintlock.runtime.taskexecutor.gateway import TaskExecutorGateway

__all__ = ["SlotManager"]

log = logging.getLogger(__name__)


class SlotManager:
    """Allocates free TaskExecutor slots to jobs' declared requirements.

    Args:
        endpoint: the owning ResourceManager (its mailbox, ``run_async`` and ``schedule``).
        gateway_for: the TaskExecutorGateway of a registered TaskExecutor, or None.
        rpc_timeout_s: timeout of ``request_slot`` calls.
        retry_delay_s: back-off before re-checking requirements after a failed request.
        validate: validate the tracker after every event (tests).
    """

    def __init__(
        self,
        endpoint: RpcEndpoint,
        gateway_for: Callable[[ResourceID], TaskExecutorGateway | None],
        rpc_timeout_s: float = 10.0,
        retry_delay_s: float = 0.05,
        validate: bool = False,
    ) -> None:
        self._endpoint = endpoint
        self._gateway_for = gateway_for
        self._rpc_timeout_s = rpc_timeout_s
        self._retry_delay_s = retry_delay_s
        self._retry_scheduled = False
        self.tracker = SlotTracker(validate=validate)
        #: called after every event (an active ResourceManager re-checks its workers)
        self.on_handled: Callable[[], None] | None = None

    def handle(self, event: SlotTrackerEvent) -> None:
        """Apply ``event`` and send the slot requests it leads to (mailbox only)."""
        for command in self.tracker.handle(event):
            self._allocate(command)
        if isinstance(event, SlotFreed):
            self._schedule_check()
        if self.on_handled is not None:
            self.on_handled()

    def _allocate(self, command: AllocateSlot) -> None:
        gateway = self._gateway_for(command.slot_id.resource_id)
        if gateway is None:
            self._request_failed(command, "TaskExecutor not connected")
            return
        log.info("Requesting slot %s for job %s (allocation %s)", command.slot_id,
                 command.job_id, command.allocation_id)
        self._endpoint.run_async(
            gateway.request_slot(command.slot_id, command.job_id, command.allocation_id,
                                 command.job_master_address, command.resource_profile,
                                 timeout=self._rpc_timeout_s),
            lambda result, error: self._on_request_done(command, result, error),
        )

    def _on_request_done(self, command: AllocateSlot, result: Any,
                         error: BaseException | None) -> None:
        if error is None:
            version = result if isinstance(result, int) and not isinstance(result, bool) else 0
            self.handle(SlotRequestAcknowledged(command.slot_id, command.allocation_id,
                                                command.cause_id, version))
        else:
            self._request_failed(command, f"{type(error).__name__}: {error}")

    def _request_failed(self, command: AllocateSlot, cause: str) -> None:
        log.info("Slot request %s for job %s failed: %s", command.slot_id, command.job_id, cause)
        self.handle(SlotRequestFailed(command.slot_id, command.allocation_id, cause,
                                      command.cause_id))
        self._schedule_check()

    def _schedule_check(self) -> None:
        if not self._retry_scheduled:
            self._retry_scheduled = True
            self._endpoint.schedule(self._retry_delay_s, self._retry)

    def _retry(self) -> None:
        self._retry_scheduled = False
        self.handle(RequirementsCheck("retry"))

    def debug_state(self) -> dict[str, Any]:
        return {
            "slots": {str(s.slot_id): (s.state.value, str(s.job_id)) for s in self.tracker.slots()},
            "jobs": {str(j): self.tracker.required_slots(j) for j in self.tracker.jobs()},
        }
