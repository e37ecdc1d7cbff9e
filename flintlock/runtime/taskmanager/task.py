"""Task: one execution attempt running in its own named thread (Flink ``taskmanager/Task``).

Life cycle (ExecutionState)::

    CREATED -> DEPLOYING (thread started, invokable class loaded)
            -> INITIALIZING (invokable constructed with its RuntimeEnvironment)
            -> RUNNING (invoke())
            -> FINISHED (with the TaskResult) | FAILED (with the error) | CANCELED
    cancel():         DEPLOYING/INITIALIZING/RUNNING -> CANCELING -> CANCELED (when the thread ends)
                      CREATED -> CANCELED
    fail_externally(): any non-terminal state -> FAILED (reported when the thread ends)

The task thread and the cancelling thread (the TaskExecutor's loop) race only in
``transition_state``, a compare-and-set under a ``threading.Lock``. Every state change is passed to
``on_state_change`` while that lock is held, so the receiver sees changes in order; the callback
must be quick and thread-safe (the TaskExecutor uses ``post_from_thread``). A terminal state is
reported only once the thread has ended, so its slot is truly free when the report arrives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.ids import ExecutionAttemptID, JobID
from flintlock.runtime.jobgraph.types import (
    ALLOWED_EXECUTION_TRANSITIONS,
    ExecutionState,
    IllegalStateTransition,
)
from flintlock.runtime.logs.capture import capture_thread_output
from flintlock.runtime.logs.task_logs import TaskLogWriter, open_task_log
from flintlock.runtime.taskmanager.invokable import (
    RuntimeEnvironment,
    TaskCancelledError,
    load_invokable_class,
)
from flintlock.runtime.taskmanager.task_execution_state import (
    IOMetrics,
    SerializedError,
    TaskExecutionState,
    TaskResult,
)

__all__ = ["Task", "task_thread_name"]

log = logging.getLogger(__name__)

_E = ExecutionState


def task_thread_name(tdd: TaskDeploymentDescriptor) -> str:
    """``Task-<vertex name>-<subtask+1>/<parallelism>#<attempt>`` (STYLE D4.4)."""
    return (f"Task-{tdd.vertex_name}-{tdd.subtask_index + 1}/{tdd.number_of_subtasks}"
            f"#{tdd.attempt_id.attempt_number}")


class Task:
    """Runs one attempt of one subtask in a dedicated thread.

    Args:
        tdd: what to run.
        services: TaskManager-wide services handed to the invokable's RuntimeEnvironment.
        on_state_change: called with every state change (from the task thread or the cancelling
            thread); must not block and must not touch endpoint state directly.
        task_manager: the ResourceID text of the TaskExecutor, put into each report.
        checkpoint_responder: where the invokable's checkpoint acknowledgements go (its
            ``RuntimeEnvironment.checkpoint_responder``).
    """

    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        services: Mapping[str, Any],
        on_state_change: Callable[[TaskExecutionState], None],
        task_manager: str = "",
        checkpoint_responder: Any = None,
    ) -> None:
        self.tdd = tdd
        self._checkpoint_responder = checkpoint_responder
        self._services = services
        self._on_state_change = on_state_change
        self._task_manager = task_manager
        self.name = tdd.task_name_with_subtask()
        self._lock = threading.Lock()
        self._state = _E.CREATED
        self._cancelled = threading.Event()
        self._invokable: Any = None
        self._failure: SerializedError | None = None
        self._result: TaskResult | None = None
        self._thread = threading.Thread(target=self._run, name=task_thread_name(tdd), daemon=True)
        self._final_reported = False
        #: what the invokable had processed when it ended (reported with CANCELED and FAILED)
        self._final_io: IOMetrics | None = None
        #: the attempt's task log while its thread runs (``services["task_logs"]``)
        self._task_log: TaskLogWriter | None = None

    # ---- accessors -----------------------------------------------------------------------------

    @property
    def attempt_id(self) -> ExecutionAttemptID:
        return self.tdd.attempt_id

    @property
    def job_id(self) -> JobID:
        return self.tdd.job_id

    @property
    def state(self) -> ExecutionState:
        return self._state

    @property
    def failure(self) -> SerializedError | None:
        return self._failure

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    @property
    def live_stats(self) -> Any:
        """The invokable's live counters while it runs (``stats`` of a streaming task), or None."""
        return getattr(self._invokable, "stats", None) if self._state is _E.RUNNING else None

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread; True if it ended (also when it never started)."""
        if self._thread.ident is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # ---- control -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the task thread (once)."""
        self._thread.start()

    def cancel(self) -> None:
        """Cancel the task; thread-safe and idempotent."""
        self._cancel_or_fail(None)

    def trigger_checkpoint(self, checkpoint_id: int, location: str, stop: str = "") -> bool:
        """Ask a RUNNING invokable to snapshot and emit barrier ``checkpoint_id`` (Flink
        ``Task.triggerCheckpointBarrier``; ``stop``: see ``TriggerCheckpoint``); False when it
        is not running or takes no checkpoints (the JobMaster then declines the checkpoint)."""
        invokable = self._invokable
        trigger = getattr(invokable, "trigger_checkpoint", None)
        if self._state is not _E.RUNNING or trigger is None:
            return False
        trigger(checkpoint_id, location, stop)
        return True

    def notify_checkpoint(self, checkpoint_id: int, complete: bool) -> None:
        """Checkpoint ``checkpoint_id`` completed (or was aborted); ignored when not running."""
        name = "notify_checkpoint_complete" if complete else "notify_checkpoint_aborted"
        notify = getattr(self._invokable, name, None)
        if self._state is _E.RUNNING and notify is not None:
            notify(checkpoint_id)

    def fail_externally(self, cause: str | BaseException) -> None:
        """Fail the task from outside (its slot is freed, its JobMaster is gone); thread-safe."""
        exc = cause if isinstance(cause, BaseException) else RuntimeError(str(cause))
        self._cancel_or_fail(SerializedError.from_exception(exc))

    def _cancel_or_fail(self, failure: SerializedError | None) -> None:
        while True:
            current = self._state
            if current.is_terminal():
                return
            if failure is None and current is _E.CANCELING:
                return
            if current is _E.CREATED:
                target = _E.CANCELED if failure is None else _E.FAILED
            else:
                target = _E.CANCELING if failure is None else _E.FAILED
            if self.transition_state(current, target, failure):
                break
        self._cancelled.set()
        invokable = self._invokable
        if invokable is not None:
            try:
                invokable.cancel()
            except Exception:  # the thread still ends through the flag
                log.exception("%s (%s): error while cancelling the invokable", self.name,
                              self.attempt_id)
        if self._thread.ident is None and self._state.is_terminal():
            # never started: nothing will report the final state otherwise
            self._report_final()

    # ---- state ---------------------------------------------------------------------------------

    def transition_state(self, expected: ExecutionState, target: ExecutionState,
                         cause: SerializedError | None = None) -> bool:
        """Compare-and-set the state; False if it was not ``expected`` any more.

        Raises:
            IllegalStateTransition: ``expected -> target`` is not an allowed transition.
        """
        if target not in ALLOWED_EXECUTION_TRANSITIONS[expected]:
            raise IllegalStateTransition(f"Task {self.name} ({self.attempt_id})", expected, target)
        with self._lock:
            if self._state is not expected:
                return False
            self._state = target
            if target is _E.FAILED and cause is not None and self._failure is None:
                self._failure = cause
            if cause is not None:
                log.info("%s (%s) switched from %s to %s with failure cause: %s", self.name,
                         self.attempt_id, expected.value, target.value, cause.short())
            else:
                log.info("%s (%s) switched from %s to %s.", self.name, self.attempt_id,
                         expected.value, target.value)
            self._log_transition(expected, target, cause)
            if not target.is_terminal():
                self._notify(target)
            return True

    def _log_transition(self, expected: ExecutionState, target: ExecutionState,
                        cause: SerializedError | None) -> None:
        task_log = self._task_log
        if task_log is None:
            return
        task_log.line(f"{self.name} switched from {expected.value} to {target.value}.")
        if cause is not None and target is _E.FAILED:
            task_log.write(f"Failure cause:\n{cause.traceback or cause.short()}\n")

    def _notify(self, state: ExecutionState) -> None:
        report = TaskExecutionState(
            self.tdd.job_id, self.tdd.attempt_id, state,
            error=self._failure if state is _E.FAILED else None,
            result=self._result if state is _E.FINISHED else None,
            task_manager=self._task_manager,
            metrics=self._final_io if state in (_E.CANCELED, _E.FAILED) else None,
        )
        try:
            self._on_state_change(report)
        except Exception:  # reporting must not kill the task
            log.exception("%s (%s): state change listener failed", self.name, self.attempt_id)

    def _report_final(self) -> None:
        with self._lock:
            if self._final_reported or not self._state.is_terminal():
                return
            self._final_reported = True
            self._notify(self._state)

    def _to_terminal(self, target: ExecutionState, cause: SerializedError | None = None) -> None:
        """Move from whatever non-terminal state to ``target`` (CANCELING only ends CANCELED)."""
        while True:
            current = self._state
            if current.is_terminal():
                return
            final = _E.CANCELED if current is _E.CANCELING and target is not _E.FAILED else target
            if final not in ALLOWED_EXECUTION_TRANSITIONS[current]:
                final = _E.FAILED
            if self.transition_state(current, final, cause):
                return

    # ---- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        """The thread: run the attempt with its output captured into its task log."""
        task_log = self._open_task_log()
        if task_log is None:
            self._run_attempt()
            return
        try:
            with capture_thread_output(task_log):
                self._run_attempt()
        finally:
            self._task_log = None
            task_log.close()

    def _open_task_log(self) -> TaskLogWriter | None:
        logs = self._services.get("task_logs")
        if logs is None:
            return None
        try:
            self._task_log = open_task_log(logs, self.tdd.job_id, self.tdd.job_name,
                                           self.attempt_id, self.name, self._task_manager)
        except Exception as exc:  # no task log is no reason to fail the task
            log.warning("%s (%s): cannot open its task log: %s", self.name, self.attempt_id, exc)
        return self._task_log

    def _injected_slowdown(self, ran_s: float) -> None:
        """A TaskManager made slow on purpose (``$internal.fault.task-slowdown``) keeps the task
        ``(factor - 1) x`` its run time longer; a cancel ends the wait.

        Raises:
            TaskCancelledError: cancelled while waiting.
        """
        factor = float(self._services.get("task_slowdown") or 1.0)
        if factor > 1.0 and self._cancelled.wait((factor - 1.0) * ran_s):
            raise TaskCancelledError("cancelled while slowed down (injected fault)")

    def _run_attempt(self) -> None:
        try:
            if not self.transition_state(_E.CREATED, _E.DEPLOYING):
                return
            cls = load_invokable_class(self.tdd.invokable_class)
            if not self.transition_state(_E.DEPLOYING, _E.INITIALIZING):
                return
            env = RuntimeEnvironment(self.tdd, self._services, self._cancelled,
                                     self.tdd.job_configuration,
                                     checkpoint_responder=self._checkpoint_responder)
            invokable = cls(env)
            self._invokable = invokable
            if self._cancelled.is_set():
                invokable.cancel()
                raise TaskCancelledError("cancelled during initialization")
            if not self.transition_state(_E.INITIALIZING, _E.RUNNING):
                return
            started = time.monotonic()
            result = invokable.invoke()
            self._injected_slowdown(time.monotonic() - started)
            if not isinstance(result, TaskResult):
                raise TypeError(
                    f"{self.tdd.invokable_class}.invoke() returned {type(result).__name__}, "
                    "expected TaskResult"
                )
            self._result = result
            if self._cancelled.is_set() or not self.transition_state(_E.RUNNING, _E.FINISHED):
                self._to_terminal(_E.CANCELED)
        except TaskCancelledError:
            self._to_terminal(_E.CANCELED)
        except BaseException as exc:  # every error ends the task
            if self._cancelled.is_set():
                self._to_terminal(_E.CANCELED)
            else:
                log.warning("%s (%s) failed: %s", self.name, self.attempt_id, exc)
                self._to_terminal(_E.FAILED, SerializedError.from_exception(exc))
        finally:
            self._final_io = IOMetrics.of_counters(getattr(self._invokable, "stats", None))
            self._invokable = None
            # an early return means a cancel or failure won the race: end in CANCELED
            self._to_terminal(_E.CANCELED)
            self._report_final()
