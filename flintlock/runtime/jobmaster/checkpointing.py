"""The JobMaster's checkpoint shell: timers, RPCs and storage I/O around ``CheckpointCoordinator``.

Runs in the JobMaster's mailbox. Periodically (``execution.checkpointing.interval``) it offers the
current executions to the pure coordinator and carries out what it returns:
``TriggerCheckpoint`` / ``NotifyCheckpoint`` RPCs to TaskExecutors, ``FinalizeCheckpoint``
(``_metadata`` written, then the sinks' pre-committed transactions published) and
``DiscardCheckpoint`` on the JobMaster's serial I/O executor, the expiry timers, and
``FailJobGlobally`` as a scheduler ``GlobalFailure``. It is also the scheduler's
``SchedulerCheckpoints``: a failover aborts pending checkpoints, a restart waits while one is
finalizing and then restores the newest completed one.

When the job ends, its checkpoints are deleted unless
``execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION`` and the job
was cancelled or failed (Flink ``CheckpointProperties``: finished jobs always discard).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from typing import Any

from flintlock.exceptions import FlintlockException
from flintlock.runtime.checkpoint import storage
from flintlock.runtime.checkpoint.coordinator import (
    CheckpointCommand,
    CheckpointCoordinator,
    CheckpointSettings,
    DiscardCheckpoint,
    ExpireCheckpoint,
    FailJobGlobally,
    FinalizeCheckpoint,
    NotifyCheckpoint,
    TaskToCheckpoint,
    TriggerCheckpoint,
)
from flintlock.runtime.checkpoint.savepoint_restore import CheckpointRestoreException, map_to_job
from flintlock.runtime.checkpoint.snapshots import (
    CheckpointMetadataException,
    CompletedCheckpoint,
    TaskStateSnapshot,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.runtime.scheduler.messages import CancelJob, CheckpointFinalized, GlobalFailure
from flintlock.runtime.taskmanager.task_execution_state import SerializedError, TaskResult

__all__ = ["CheckpointCoordinatorShell", "CheckpointException"]


class CheckpointException(FlintlockException):
    """A checkpoint or savepoint could not be taken (Flink ``CheckpointException``)."""

log = logging.getLogger(__name__)


class CheckpointCoordinatorShell:
    """See the module docstring.

    Args:
        job_master: the JobMaster (its mailbox, timers, TaskExecutor calls, graph, scheduler).
        settings: the job's checkpointing settings.
        io: runs blocking storage work in order on the JobMaster's serial I/O executor;
            ``io(fn, on_done)`` calls ``on_done(result, error)`` in the mailbox.
    """

    def __init__(self, job_master: Any, settings: CheckpointSettings,
                 io: Callable[[Callable[[], Any], Callable[[Any, BaseException | None], Any]], None],
                 ) -> None:
        self.jm = job_master
        self.settings = settings
        self.coordinator = CheckpointCoordinator(str(job_master.job_id), settings)
        self._io = io
        self._stopped = False
        #: savepoints in progress: checkpoint id -> (location, cancel the job when complete)
        self._savepoints: dict[int, tuple[str, bool]] = {}
        #: location -> ("IN_PROGRESS" | "COMPLETED" | "FAILED", failure message)
        self.savepoint_results: dict[str, tuple[str, str]] = {}

    @property
    def job_directory(self) -> str:
        return f"{self.settings.directory}/{self.jm.job_id}"

    # ---- life cycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin periodic checkpoints (the first after one interval), if configured."""
        if self.settings.interval_s is not None:
            self.jm.schedule(self.settings.interval_s, self._tick)

    def restore_at_start(self, checkpoint: CompletedCheckpoint) -> None:
        """Deploy the first attempts from ``checkpoint``: a savepoint given at submission, or
        the job's own newest checkpoint after a JobManager failover, whose sink transactions
        are published again (idempotent: the leader may have died before it published them)."""
        self.coordinator.add_restored(checkpoint, self.jm.clock.now_ms())
        if checkpoint.job_id == str(self.jm.job_id):
            self._io(lambda: self._commit_sinks(checkpoint), _log_error("re-committing sinks"))
        for execution in self.jm.graph.current_executions():
            state = checkpoint.task_state(execution.attempt_id.job_vertex_id,
                                          execution.attempt_id.subtask_index)
            if state is not None:
                execution.task_restore = (checkpoint.checkpoint_id, state)
        log.info("job %s: starting from %s", self.jm.job_id, checkpoint.external_pointer)

    def load_savepoint(self, path: str, allow_non_restored: bool) -> CompletedCheckpoint:
        """Read the savepoint at ``path`` and match it to this job (worker thread).

        Raises:
            CheckpointRestoreException: missing, corrupt, or not matching the program (says why).
        """
        try:
            checkpoint = storage.read_checkpoint(path)
        except (OSError, CheckpointMetadataException) as exc:
            raise CheckpointRestoreException(
                f"cannot start job {self.jm.job_id} from savepoint {path!r}: {exc} "
                "(execution.savepoint.path / flintlock run -s)") from exc
        return map_to_job(checkpoint, self.jm.job_graph, allow_non_restored)

    def trigger_savepoint(self, target_directory: str, cancel_job: bool = False,
                          stop: str = "") -> str:
        """Start a savepoint under ``target_directory``; returns its path at once (its progress:
        ``savepoint_results[path]``). With ``cancel_job`` the job is cancelled once it completed;
        with ``stop`` (``"suspend"`` / ``"terminate"``) the sources stop after its barrier and
        end once it completed, so the job FINISHES (Flink's stop-with-savepoint).

        Raises:
            CheckpointException: the job is not RUNNING, or a subtask is not running.
        """
        graph = self.jm.graph
        if self._stopped or graph is None or graph.state is not JobStatus.RUNNING:
            state = "not started" if graph is None else graph.state.name
            raise CheckpointException(
                f"cannot take a savepoint of job {self.jm.job_id}: it is {state}, not RUNNING")
        location = (f"{target_directory.rstrip('/')}/savepoint-{str(self.jm.job_id)[:6]}-"
                    f"{uuid.uuid4().hex[:12]}")
        n, why, commands = self.coordinator.trigger(
            self.jm.clock.monotonic(), self.jm.clock.now_ms(), self._tasks(),
            savepoint_location=location, stop=stop)
        if n is None:
            raise CheckpointException(f"cannot take a savepoint of job {self.jm.job_id}: {why}")
        log.info("Triggering %ssavepoint %d for job %s into %s.",
                 f"stop-with-savepoint ({stop}) " if stop else "", n, self.jm.job_id, location)
        self._savepoints[n] = (location, cancel_job)
        self.savepoint_results[location] = ("IN_PROGRESS", "")
        self.apply(commands)
        return location

    def _tick(self) -> None:
        if self._stopped or self.jm.job_result is not None:
            return
        graph = self.jm.graph
        if graph is not None and graph.state is JobStatus.RUNNING:
            n, why, commands = self.coordinator.trigger(
                self.jm.clock.monotonic(), self.jm.clock.now_ms(), self._tasks())
            if n is None:
                log.debug("job %s: checkpoint not triggered: %s", self.jm.job_id, why)
            else:
                log.info("Triggering checkpoint %d for job %s.", n, self.jm.job_id)
            self.apply(commands)
        assert self.settings.interval_s is not None
        self.jm.schedule(self.settings.interval_s, self._tick)

    def _tasks(self) -> list[TaskToCheckpoint]:
        graph = self.jm.graph
        out = []
        for execution in graph.current_executions():
            vertex = graph.vertex(execution.attempt_id.execution_vertex_id)
            out.append(TaskToCheckpoint(
                execution.attempt_id, execution.state,
                vertex.job_vertex.job_vertex.source is not None,
                execution.slot.task_executor_address if execution.slot is not None else ""))
        return out

    def job_terminated(self, status: JobStatus) -> None:
        """The job ended: abort what is pending; delete the checkpoints unless retained."""
        self._stopped = True
        now_s, now_ms = self.jm.clock.monotonic(), self.jm.clock.now_ms()
        self.apply([c for c in self.coordinator.abort_all(f"job {status.name}", now_s, now_ms)
                    if not isinstance(c, NotifyCheckpoint)])
        retain = (self.settings.retention == "RETAIN_ON_CANCELLATION"
                  and status in (JobStatus.CANCELED, JobStatus.FAILED))
        if not retain:
            self._io(lambda: self._discard(self.job_directory), _log_error("discard checkpoints"))

    # ---- RPCs from tasks ------------------------------------------------------------------------------

    def acknowledge(self, attempt_id: ExecutionAttemptID, checkpoint_id: int,
                    snapshot: TaskStateSnapshot) -> None:
        self.apply(self.coordinator.acknowledge(attempt_id, checkpoint_id, snapshot,
                                                self.jm.clock.now_ms()))

    def decline(self, attempt_id: ExecutionAttemptID, checkpoint_id: int, reason: str) -> None:
        self.apply(self.coordinator.decline(attempt_id, checkpoint_id, reason,
                                            self.jm.clock.monotonic(), self.jm.clock.now_ms()))

    def task_finished(self, attempt_id: ExecutionAttemptID, result: TaskResult | None) -> None:
        """A subtask FINISHED: its files not yet published count as its state in every later
        checkpoint (a restore then treats it as finished)."""
        transactions = {i: (c,) for i, c in (result.committables if result else {}).items()
                        if isinstance(c, str)}
        snapshot = TaskStateSnapshot(finished=True, sink_transactions=transactions)
        self.apply(self.coordinator.task_finished(attempt_id, self.jm.clock.now_ms(), snapshot))

    # ---- SchedulerCheckpoints -------------------------------------------------------------------------

    def on_failover(self) -> None:
        self.apply(self.coordinator.abort_all("the job is restarting", self.jm.clock.monotonic(),
                                              self.jm.clock.now_ms()))

    def restore_blocked(self) -> bool:
        return any(p.finalizing for p in self.coordinator.pending.values())

    def restore_state(self, vertices: list[ExecutionVertexID]) -> dict[ExecutionVertexID, Any]:
        latest = self.coordinator.restore_latest(self.jm.clock.now_ms(), vertices)
        if latest is None:
            return {}
        log.info("job %s: restoring %d subtask(s) from checkpoint %d (%s)", self.jm.job_id,
                 len(vertices), latest.checkpoint_id, latest.external_pointer)
        # publishing is idempotent: finish what a failed commit may have left
        self._io(lambda: self._commit_sinks(latest), _log_error("re-committing sinks"))
        out = {}
        for v in vertices:
            state = latest.task_state(v.job_vertex_id, v.subtask_index)
            if state is not None:
                out[v] = (latest.checkpoint_id, state)
        return out

    # ---- commands ----------------------------------------------------------------------------------------

    def apply(self, commands: list[CheckpointCommand]) -> None:
        for command in commands:
            if isinstance(command, TriggerCheckpoint):
                self._trigger(command)
            elif isinstance(command, NotifyCheckpoint):
                method = ("notify_checkpoint_complete" if command.complete
                          else "notify_checkpoint_aborted")
                self.jm._send(self.jm._call_te(command.task_executor_address, method,
                                               command.attempt_id, command.checkpoint_id),
                              _log_error(method))
            elif isinstance(command, FinalizeCheckpoint):
                self._finalize(command.checkpoint)
            elif isinstance(command, DiscardCheckpoint):
                location = command.location
                self._io(functools.partial(self._discard, location),
                         _log_error(f"discarding {location}"))
            elif isinstance(command, ExpireCheckpoint):
                self.jm.schedule(command.delay_s, self._expire, command.checkpoint_id)
            elif isinstance(command, FailJobGlobally):
                self.jm._handle(GlobalFailure(SerializedError("CheckpointException",
                                                              command.reason)))
            else:  # pragma: no cover
                raise TypeError(f"unknown checkpoint command {command!r}")
        self._settle_savepoints()

    def _settle_savepoints(self) -> None:
        """Answer the callers of savepoints that completed or failed."""
        for n, (location, cancel_job) in list(self._savepoints.items()):
            if n in self.coordinator.pending:
                continue
            del self._savepoints[n]
            stats = self.coordinator.stats(n)
            if stats is not None and stats.status == "COMPLETED":
                self.savepoint_results[location] = ("COMPLETED", "")
                log.info("Savepoint %d of job %s completed: %s", n, self.jm.job_id, location)
                if cancel_job:
                    self.jm._handle(CancelJob())
            else:
                reason = stats.failure_message if stats is not None else "it was aborted"
                self.savepoint_results[location] = ("FAILED", f"savepoint {n} failed: {reason}")

    def _trigger(self, command: TriggerCheckpoint) -> None:
        def done(_: Any, error: BaseException | None) -> None:
            if error is not None:
                self.decline(command.attempt_id, command.checkpoint_id,
                             f"triggering failed: {error}")

        self.jm._send(self.jm._call_te(command.task_executor_address, "trigger_checkpoint",
                                       command.attempt_id, command.checkpoint_id,
                                       command.timestamp_ms, command.location, command.stop),
                     done)

    def _expire(self, checkpoint_id: int) -> None:
        self.apply(self.coordinator.expire(checkpoint_id, self.jm.clock.monotonic(),
                                           self.jm.clock.now_ms()))

    def _finalize(self, checkpoint: CompletedCheckpoint) -> None:
        n = checkpoint.checkpoint_id

        def work() -> str | None:
            self.jm.check_leadership()  # a deposed leader completes no checkpoint
            storage.write_metadata(checkpoint)
            try:
                self._commit_sinks(checkpoint)
            except Exception as exc:  # completed all the same; a restore publishes them again
                log.exception("job %s: publishing the sink transactions of checkpoint %d failed",
                              self.jm.job_id, n)
                return f"{type(exc).__name__}: {exc}"
            return None

        def done(commit_error: str | None, error: BaseException | None) -> None:
            now_s, now_ms = self.jm.clock.monotonic(), self.jm.clock.now_ms()
            reason = None if error is None else f"{type(error).__name__}: {error}"
            self.apply(self.coordinator.finalized(checkpoint, reason, now_s, now_ms))
            if error is None:
                log.info("Completed checkpoint %d for job %s (%d bytes).", n, self.jm.job_id,
                         checkpoint.state_size)
            if commit_error is not None:
                self.jm._handle(GlobalFailure(SerializedError(
                    "CheckpointException", f"publishing the output of checkpoint {n} failed: "
                    f"{commit_error}")))
            self.jm._handle(CheckpointFinalized())

        self._io(work, done)

    def _discard(self, location: str) -> None:
        """Delete checkpoint data (I/O executor), unless this JobManager no longer leads: a
        newer leader may be restoring from it (``LeadershipLostException``)."""
        self.jm.check_leadership()
        storage.discard(location)

    def _commit_sinks(self, checkpoint: CompletedCheckpoint) -> None:
        """Publish the transactions ``checkpoint`` names (I/O executor).

        Raises:
            LeadershipLostException: this JobManager no longer leads (nothing is published).
        """
        self.jm.check_leadership()
        by_vertex = {str(v.id): v for v in self.jm.job_graph.vertices}
        work: dict[tuple[str, int], list[tuple[int, str]]] = {}
        for key, state in checkpoint.tasks.items():
            vertex_id, _, subtask = key.rpartition("/")
            for sink_index, directories in state.sink_transactions.items():
                work.setdefault((vertex_id, sink_index), []).extend(
                    (int(subtask), d) for d in directories)
        job_id = str(self.jm.job_id)
        for (vertex_id, sink_index), transactions in sorted(work.items()):
            vertex = by_vertex.get(vertex_id)
            if vertex is None or sink_index >= len(vertex.sinks):
                continue
            commit = getattr(vertex.sinks[sink_index], "commit_transactions", None)
            if commit is not None:
                commit(job_id, transactions)


def _log_error(what: str) -> Callable[[Any, BaseException | None], None]:
    def done(_: Any, error: BaseException | None) -> None:
        if error is not None:
            log.warning("%s failed: %s", what, error)

    return done

