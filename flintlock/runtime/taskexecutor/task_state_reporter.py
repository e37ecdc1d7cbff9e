"""TaskStateReporter: a TaskExecutor's task state changes on their way to the JobMaster.

Per attempt, the states are sent one at a time and in order (INITIALIZING before RUNNING before
FINISHED), each ``updateTaskExecutionState`` retried up to ``REPORT_RETRIES`` times on an RPC
timeout; other errors are logged and the next state goes on. Follows Flink
``TaskExecutor.updateTaskExecutionState`` / ``JobMasterGateway.updateTaskExecutionState``.

Runs in the TaskExecutor's mailbox: ``run_async`` starts the RPC and calls back in the mailbox.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.ids import ExecutionAttemptID
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.rpc.exceptions import RpcTimeout
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState

__all__ = ["REPORT_RETRIES", "TaskStateReporter"]

log = logging.getLogger(__name__)

#: retries of one report after an RPC timeout
REPORT_RETRIES = 3


@dataclass
class _ReportQueue:
    """State changes of one attempt waiting to reach the JobMaster, sent one at a time."""

    gateway: JobMasterGateway
    pending: deque[TaskExecutionState] = field(default_factory=deque)
    in_flight: bool = False
    retries: int = 0


class TaskStateReporter:
    """Sends each attempt's state changes to its JobMaster, in order, one RPC at a time.

    Args:
        run_async: ``run_async(awaitable, on_done)`` of the owning endpoint (``on_done(result,
            error)`` runs in its mailbox).
        rpc_timeout_s: timeout of one ``update_task_execution_state`` call (seconds).
        is_stopping: True once the TaskExecutor stops (queued reports are then dropped).
    """

    def __init__(
        self,
        run_async: Callable[[Awaitable[Any], Callable[[Any, BaseException | None], Any]], Any],
        rpc_timeout_s: float,
        is_stopping: Callable[[], bool],
    ) -> None:
        self._run_async = run_async
        self._rpc_timeout_s = rpc_timeout_s
        self._is_stopping = is_stopping
        self._queues: dict[ExecutionAttemptID, _ReportQueue] = {}

    def __len__(self) -> int:
        """Attempts with states still to send."""
        return len(self._queues)

    def enqueue(self, state: TaskExecutionState, gateway: JobMasterGateway) -> None:
        """Queue ``state`` behind the attempt's earlier states and send it when they are through."""
        queue = self._queues.get(state.attempt_id)
        if queue is None:
            queue = self._queues[state.attempt_id] = _ReportQueue(gateway)
        queue.pending.append(state)
        self._send_next(state.attempt_id)

    def _send_next(self, attempt_id: ExecutionAttemptID) -> None:
        queue = self._queues.get(attempt_id)
        if queue is None or queue.in_flight:
            return
        if not queue.pending or self._is_stopping():
            del self._queues[attempt_id]
            return
        state = queue.pending[0]
        queue.in_flight = True
        self._run_async(
            queue.gateway.update_task_execution_state(state, timeout=self._rpc_timeout_s),
            lambda _r, error: self._on_done(attempt_id, error),
        )

    def _on_done(self, attempt_id: ExecutionAttemptID, error: BaseException | None) -> None:
        queue = self._queues.get(attempt_id)
        if queue is None:
            return
        queue.in_flight = False
        if isinstance(error, RpcTimeout) and queue.retries < REPORT_RETRIES:
            queue.retries += 1
            log.info("Reporting %s of %s timed out; retry %d.", queue.pending[0].state.value,
                     attempt_id, queue.retries)
        else:
            state = queue.pending.popleft()
            queue.retries = 0
            if error is not None:
                log.warning("Could not report state %s of %s to the JobMaster: %s",
                            state.state.value, attempt_id, error)
        self._send_next(attempt_id)
