"""What to do about a failed task: restart which subtasks after which back-off, or fail the job.

Follows Flink ``ExecutionFailureHandler`` and ``FailureHandlingResult`` (fact sheet 8.3): the handler
asks the restart back-off strategy whether the failure may be recovered and, if so, the failover
strategy which execution vertices must restart; the scheduler carries the result out (cancel,
wait, reset, reschedule; or FAILING). ``PendingRestarts`` keeps the restarts the scheduler is
carrying out until their back-off elapsed and all their vertices are terminal. Pure: no I/O, time
is passed in.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from flintlock.runtime.executiongraph.archived import ExceptionHistoryEntry
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.failover.failover_strategy import FailoverStrategy
from flintlock.runtime.executiongraph.failover.restart_backoff import RestartBackoffTimeStrategy
from flintlock.runtime.ids import ExecutionVertexID, JobID
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = [
    "ExecutionFailureHandler",
    "FailureHandlingResult",
    "PendingRestart",
    "PendingRestarts",
    "task_failure_entry",
]

log = logging.getLogger(__name__)


def task_failure_entry(
    execution: Execution, error: SerializedError, timestamp_ms: int
) -> ExceptionHistoryEntry:
    """The exception history entry of ``execution`` failing with ``error``."""
    return ExceptionHistoryEntry(
        error=error,
        timestamp_ms=timestamp_ms,
        task_name=execution.task_name_with_subtask(),
        location=execution.location(),
        attempt_id=execution.attempt_id,
    )


@dataclass(frozen=True)
class FailureHandlingResult:
    """The decision about one failure (Flink ``FailureHandlingResult``)."""

    #: the failure being handled
    entry: ExceptionHistoryEntry
    #: False: the job must fail with ``entry``
    can_restart: bool
    #: the execution vertices to cancel and restart (empty unless ``can_restart``)
    vertices_to_restart: frozenset[ExecutionVertexID] = frozenset()
    #: seconds to wait before the restart
    restart_delay_s: float = 0.0
    #: the failure counts as a new restart attempt of the job
    new_attempt: bool = False

    @classmethod
    def unrecoverable(cls, entry: ExceptionHistoryEntry) -> FailureHandlingResult:
        return cls(entry, can_restart=False)


class ExecutionFailureHandler:
    """Turns a task failure into a ``FailureHandlingResult``.

    Args:
        job_id: for log lines.
        failover_strategy: which vertices restart with the failed one.
        restart_backoff: whether and when the job may restart.
    """

    def __init__(
        self,
        job_id: JobID,
        failover_strategy: FailoverStrategy,
        restart_backoff: RestartBackoffTimeStrategy,
    ) -> None:
        self.job_id = job_id
        self.failover_strategy = failover_strategy
        self.restart_backoff = restart_backoff

    def task_failure(
        self, vertex_id: ExecutionVertexID, entry: ExceptionHistoryEntry, now: float
    ) -> FailureHandlingResult:
        """Handle the failure ``entry`` of the current attempt of ``vertex_id`` at ``now`` (seconds).

        A non-recoverable error fails the job without consulting the back-off strategy.
        """
        if entry.error.non_recoverable:
            return FailureHandlingResult.unrecoverable(entry)
        new_attempt = self.restart_backoff.notify_failure(now)
        if not self.restart_backoff.can_restart(now):
            log.info(
                "job %s: recovery is suppressed by %s", self.job_id, self.restart_backoff.describe()
            )
            return FailureHandlingResult.unrecoverable(entry)
        vertices = self.failover_strategy.tasks_needing_restart(vertex_id, entry.error) | {vertex_id}
        return FailureHandlingResult(
            entry,
            can_restart=True,
            vertices_to_restart=frozenset(vertices),
            restart_delay_s=self.restart_backoff.backoff_time_s(now),
            new_attempt=new_attempt,
        )


    def global_failure(self, vertices: frozenset[ExecutionVertexID], entry: ExceptionHistoryEntry,
                       now: float) -> FailureHandlingResult:
        """A failure of the job as a whole (Flink ``getGlobalFailureHandlingResult``, e.g. too
        many failed checkpoints): restart every vertex if the back-off strategy allows."""
        if entry.error.non_recoverable:
            return FailureHandlingResult.unrecoverable(entry)
        new_attempt = self.restart_backoff.notify_failure(now)
        if not self.restart_backoff.can_restart(now):
            return FailureHandlingResult.unrecoverable(entry)
        return FailureHandlingResult(entry, can_restart=True, vertices_to_restart=vertices,
                                     restart_delay_s=self.restart_backoff.backoff_time_s(now),
                                     new_attempt=new_attempt)


@dataclass(eq=False)
class PendingRestart:
    """Vertices being cancelled for a restart; restarted once the back-off elapsed."""

    id: int
    vertices: set[ExecutionVertexID]
    delay_elapsed: bool = False


class PendingRestarts:
    """The restarts in progress, in the order they were started."""

    def __init__(self) -> None:
        self._pending: dict[int, PendingRestart] = {}
        self._ids = itertools.count(1)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def add(self, vertices: set[ExecutionVertexID]) -> PendingRestart | None:
        """Start restarting ``vertices`` not already pending; None when there are none."""
        already = {v for r in self._pending.values() for v in r.vertices}
        vertices = vertices - already
        if not vertices:
            return None
        restart = PendingRestart(next(self._ids), set(vertices))
        self._pending[restart.id] = restart
        return restart

    def delay_elapsed(self, restart_id: int) -> bool:
        """The back-off of ``restart_id`` elapsed; False if it is no longer pending."""
        restart = self._pending.get(restart_id)
        if restart is None:
            return False
        restart.delay_elapsed = True
        return True

    def take_ready(
        self, is_terminal: Callable[[ExecutionVertexID], bool]
    ) -> Iterator[PendingRestart]:
        """Yield and forget each restart whose back-off elapsed and whose vertices are terminal.

        Checked lazily, in start order, so the caller acts on one before the next is checked.
        """
        for restart in list(self._pending.values()):
            if not restart.delay_elapsed:
                continue
            if not all(is_terminal(v) for v in restart.vertices):
                continue
            del self._pending[restart.id]
            yield restart

    def clear(self) -> None:
        self._pending.clear()
