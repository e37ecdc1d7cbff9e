"""Failure handling of ``DefaultScheduler``: restart or fail, cancellation, global termination.

Follows Flink ``DefaultScheduler.handleTaskFailure`` / ``restartTasksWithDelay`` /
``handleGlobalFailure`` (fact sheet 5.1). A mixin of the pure scheduler core (no I/O): it reads
and writes the scheduler's graph, pending restarts and command list, and asks the checkpoint
coordinator's shell (``SchedulerCheckpoints``) to abort pending checkpoints on a failover and
for the state restarted subtasks start from.
"""

from __future__ import annotations

from typing import Any

from flintlock.runtime.executiongraph.archived import ExceptionHistoryEntry
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.scheduler.job_termination import sink_work
from flintlock.runtime.scheduler.messages import (
    CancelTask,
    FinalizeSinks,
    RestartDelayElapsed,
    ScheduleTimer,
)

__all__ = ["FailureHandling"]


class FailureHandling:
    """Mixed into ``DefaultScheduler``; see the module docstring."""

    graph: Any
    failure_handler: Any
    checkpoints: Any
    strategy: Any
    clock: Any
    sink_phase: str | None
    _restarts: Any
    _order: dict[Any, int]
    _out: list[Any]

    #: from ``DefaultScheduler``
    _transition: Any
    _release_slot_share: Any
    _schedule: Any
    _terminate: Any

    def _handle_task_failure(self, execution: Execution, entry: ExceptionHistoryEntry) -> None:
        """Carry out the ``ExecutionFailureHandler``'s decision: restart vertices, or fail the job."""
        if self.graph.state not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return
        result = self.failure_handler.task_failure(
            execution.attempt_id.execution_vertex_id, entry, self.clock.monotonic()
        )
        self._restart_or_fail(result)

    def _restart_or_fail(self, result: Any) -> None:
        """Carry out a ``FailureHandlingResult``: cancel and later restart, or fail the job."""
        entry = result.entry
        if not result.can_restart:
            self._fail_job(result.entry)
            return
        if result.new_attempt:
            self.graph.number_of_restarts += 1
        restart = self._restarts.add(set(result.vertices_to_restart))
        if restart is None:
            return
        if self.graph.state is JobStatus.RUNNING:
            self.graph.transition_to(
                JobStatus.RESTARTING, f"restarting {len(restart.vertices)} subtask(s)"
            )
        if self.checkpoints is not None:
            self.checkpoints.on_failover()
        for v in sorted(restart.vertices, key=self._order.__getitem__):
            for execution in self.graph.vertex(v).current_executions():  # speculative ones too
                self._cancel_execution(execution)
        self._out.append(ScheduleTimer(result.restart_delay_s, RestartDelayElapsed(restart.id)))
        # counted from the failure's own timestamp (read once), so the UI's "restarts in" and
        # the exception history agree to the millisecond
        self.graph.next_restart_attempt_ms = entry.timestamp_ms + round(result.restart_delay_s * 1000)

    def _try_complete_restarts(self) -> None:
        if self.checkpoints is not None and self.checkpoints.restore_blocked():
            return
        for restart in self._restarts.take_ready(
            lambda v: not self.graph.vertex(v).live_executions()
        ):
            now_ms = self.clock.now_ms()
            ordered = sorted(restart.vertices, key=self._order.__getitem__)
            for v in ordered:
                self.graph.reset_vertex(v, now_ms)
            if self.checkpoints is not None:
                for v, restore in self.checkpoints.restore_state(ordered).items():
                    self.graph.vertex(v).current_execution.task_restore = restore
            if not self._restarts and self.graph.state is JobStatus.RESTARTING:
                self.graph.transition_to(JobStatus.RUNNING, "restarted")
            self._schedule(self.strategy.restart_tasks(ordered))

    def _fail_job(self, entry: ExceptionHistoryEntry) -> None:
        """Unrecoverable failure: FAILING, cancel everything, then FAILED (after sink abort)."""
        state = self.graph.state
        if state.is_terminal() or state in (JobStatus.FAILING, JobStatus.CANCELLING):
            return
        self.graph.failure_info = entry
        if entry not in self.graph.exception_history:
            self.graph.record_failure(entry)
        self.graph.transition_to(JobStatus.FAILING, entry.error.short())
        self._restarts.clear()
        self._cancel_all()
        self._check_global_termination()

    def _cancel_all(self) -> None:
        for execution in list(self.graph.all_current_executions()):
            self._cancel_execution(execution)

    def _cancel_execution(self, execution: Execution) -> None:
        """Flink ``Execution.cancel``: not deployed -> CANCELED; deployed -> CANCELING + RPC."""
        if execution.is_terminal() or execution.state is ExecutionState.CANCELING:
            return
        if execution.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
            self._transition(execution, ExecutionState.CANCELED, "cancelled before deployment")
            self._release_slot_share(execution)
            return
        self._transition(execution, ExecutionState.CANCELING)
        assert execution.slot is not None
        self._out.append(CancelTask(execution.slot.task_executor_address, execution.attempt_id))

    def _check_global_termination(self) -> None:
        if self.graph.state not in (JobStatus.FAILING, JobStatus.CANCELLING):
            return
        if self.sink_phase is not None or not self.graph.all_terminal():
            return
        work = sink_work(self.graph, commit=False)
        if work:
            self.sink_phase = "abort"
            self._out.append(FinalizeSinks(False, work))
        else:
            self._terminate(
                JobStatus.CANCELED if self.graph.state is JobStatus.CANCELLING else JobStatus.FAILED
            )
