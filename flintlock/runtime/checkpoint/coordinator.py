"""CheckpointCoordinator: triggers checkpoints, collects acknowledgements, completes or aborts them.

Follows Flink ``runtime/checkpoint/CheckpointCoordinator`` (with ``PendingCheckpoint``,
``CheckpointFailureManager`` and ``StandaloneCompletedCheckpointStore``). A pure core: the
JobMaster's ``CheckpointCoordinatorShell`` (``jobmaster.checkpointing``) feeds it the clock and
the current executions and carries out the commands it returns (RPCs, the ``_metadata`` write,
sink commits, timers).

Protocol of checkpoint n (ids start at 1, Flink's ``CheckpointIDCounter``):

1. ``trigger``: refused (``None`` + a reason) while ``max_concurrent`` checkpoints are pending,
   less than ``min_pause`` after the last one ended, or while a subtask is not RUNNING or
   FINISHED (Flink: "Not all required tasks are currently running"). Otherwise every RUNNING
   subtask must acknowledge, FINISHED ones count as acknowledged with ``finished`` state, and
   ``TriggerCheckpoint`` goes to the RUNNING source subtasks; an ``ExpireCheckpoint`` timer is
   set at ``timeout``.
2. ``acknowledge``: a subtask's ``TaskStateSnapshot``. When the last one arrived, the
   checkpoint is FINALIZING: ``FinalizeCheckpoint`` (write ``_metadata``, then commit the sink
   transactions it names) runs in the shell, which reports ``finalized(n, error)``.
3. ``finalized`` without error: n joins the store (``num_retained`` newest kept; older ones are
   discarded: ``DiscardCheckpoint``), every subtask of n gets ``NotifyCheckpoint(complete)``,
   and the consecutive-failure count resets.
4. ``decline`` / ``expire`` / a failed finalization: n is aborted (its directory discarded,
   subtasks told ``NotifyCheckpoint(complete=False)``), counting towards
   ``tolerable_failures``; one failure beyond it returns ``FailJobGlobally`` (the job restarts
   by its restart strategy). ``abort_all`` (a failover) aborts without counting.

Restore: ``latest()`` is the newest completed checkpoint; the scheduler gives each restarted
subtask its ``TaskStateSnapshot`` (``restore_state``).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flintlock.config import options
from flintlock.runtime.checkpoint.snapshots import (
    CompletedCheckpoint,
    TaskStateSnapshot,
    subtask_key,
)
from flintlock.runtime.ids import ExecutionAttemptID
from flintlock.runtime.jobgraph.types import ExecutionState

__all__ = [
    "CheckpointCommand",
    "CheckpointCoordinator",
    "CheckpointSettings",
    "CheckpointStats",
    "DiscardCheckpoint",
    "ExpireCheckpoint",
    "FailJobGlobally",
    "FinalizeCheckpoint",
    "NotifyCheckpoint",
    "TaskToCheckpoint",
    "TriggerCheckpoint",
]

log = logging.getLogger(__name__)

#: checkpoints kept in the statistics' history (Flink ``web.checkpoints.history``)
HISTORY_SIZE = 10


@dataclass(frozen=True)
class CheckpointSettings:
    """The job's checkpointing configuration (seconds; ``interval_s`` None: off)."""

    interval_s: float | None
    mode: str = "EXACTLY_ONCE"
    timeout_s: float = 600.0
    min_pause_s: float = 0.0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    num_retained: int = 1
    retention: str = "NO_EXTERNALIZED_CHECKPOINTS"
    #: ``<state.checkpoints.dir>`` (or the JobMaster's own directory); chk-n go under <dir>/<job>
    directory: str = ""

    @property
    def enabled(self) -> bool:
        return self.interval_s is not None

    @classmethod
    def from_configuration(cls, conf: Any, default_dir: str) -> CheckpointSettings:
        return cls(
            interval_s=conf.get(options.CHECKPOINTING_INTERVAL),
            mode=conf.get(options.CHECKPOINTING_MODE),
            timeout_s=conf.get(options.CHECKPOINTING_TIMEOUT),
            min_pause_s=conf.get(options.CHECKPOINTING_MIN_PAUSE),
            max_concurrent=conf.get(options.CHECKPOINTING_MAX_CONCURRENT),
            tolerable_failures=conf.get(options.CHECKPOINTING_TOLERABLE_FAILURES),
            num_retained=conf.get(options.CHECKPOINTS_RETAINED),
            retention=conf.get(options.CHECKPOINTS_RETENTION),
            directory=(conf.get(options.CHECKPOINTS_DIR) or default_dir).rstrip("/"),
        )


@dataclass(frozen=True)
class TaskToCheckpoint:
    """A current execution as the coordinator sees it when triggering."""

    attempt_id: ExecutionAttemptID
    state: ExecutionState
    is_source: bool
    task_executor_address: str = ""

    @property
    def key(self) -> str:
        return subtask_key(self.attempt_id.job_vertex_id, self.attempt_id.subtask_index)


# ---- commands --------------------------------------------------------------------------------------


class CheckpointCommand:
    """Something the shell carries out."""


@dataclass(frozen=True)
class TriggerCheckpoint(CheckpointCommand):
    """RPC ``trigger_checkpoint`` to a source subtask: snapshot and emit barrier n.

    ``stop``: ``""``, or a stop-with-savepoint's Flink ``SavepointType``: ``"suspend"`` (the
    source stops after the barrier) or ``"terminate"`` (it also drains: MAX_WATERMARK, end of
    input) once the savepoint completed; it resumes when the savepoint is aborted."""

    task_executor_address: str
    attempt_id: ExecutionAttemptID
    checkpoint_id: int
    timestamp_ms: int
    location: str
    stop: str = ""


@dataclass(frozen=True)
class NotifyCheckpoint(CheckpointCommand):
    """RPC ``notify_checkpoint_complete`` / ``_aborted`` to a subtask."""

    task_executor_address: str
    attempt_id: ExecutionAttemptID
    checkpoint_id: int
    complete: bool


@dataclass(frozen=True)
class FinalizeCheckpoint(CheckpointCommand):
    """Write ``checkpoint``'s ``_metadata``, then commit its sink transactions; report
    ``finalized``."""

    checkpoint: CompletedCheckpoint


@dataclass(frozen=True)
class DiscardCheckpoint(CheckpointCommand):
    """Delete a checkpoint directory (subsumed, or of an aborted checkpoint)."""

    location: str


@dataclass(frozen=True)
class ExpireCheckpoint(CheckpointCommand):
    """Call ``expire(checkpoint_id)`` after ``delay_s``."""

    delay_s: float
    checkpoint_id: int


@dataclass(frozen=True)
class FailJobGlobally(CheckpointCommand):
    """Too many checkpoint failures: fail the job (it restarts by its restart strategy)."""

    reason: str


# ---- state ----------------------------------------------------------------------------------------


@dataclass
class _Pending:
    checkpoint_id: int
    trigger_ms: int
    location: str
    savepoint: bool
    tasks: dict[ExecutionAttemptID, TaskToCheckpoint]
    waiting: set[ExecutionAttemptID]
    acked: dict[str, TaskStateSnapshot] = field(default_factory=dict)
    latest_ack_ms: int = 0
    finalizing: bool = False


@dataclass
class CheckpointStats:
    """One checkpoint as REST and the web UI show it (Flink ``AbstractCheckpointStats``)."""

    checkpoint_id: int
    status: str  # IN_PROGRESS, COMPLETED, FAILED
    savepoint: bool
    trigger_timestamp_ms: int
    num_subtasks: int
    num_acknowledged: int = 0
    latest_ack_timestamp_ms: int = 0
    state_size: int = 0
    external_path: str = ""
    failure_timestamp_ms: int = 0
    failure_message: str = ""
    #: acknowledged subtasks per job vertex id (text)
    acknowledged_per_vertex: dict[str, int] = field(default_factory=dict)
    subtasks_per_vertex: dict[str, int] = field(default_factory=dict)
    #: subtask key (``<vertex>/<index>``) -> (acknowledgement time in epoch ms, state bytes)
    subtask_acks: dict[str, tuple[int, int]] = field(default_factory=dict)


class CheckpointCoordinator:
    """See the module docstring.

    Args:
        job_id: the job (text).
        settings: its checkpointing configuration.
    """

    def __init__(self, job_id: str, settings: CheckpointSettings) -> None:
        self.job_id = job_id
        self.settings = settings
        self.next_id = 1
        self.pending: dict[int, _Pending] = {}
        self.completed: collections.deque[CompletedCheckpoint] = collections.deque()
        self.consecutive_failures = 0
        self._last_end_s: float | None = None
        #: per subtask key, the state of a FINISHED attempt: its files not yet published, so
        #: every later checkpoint publishes them (``task_finished``)
        self.finished_states: dict[str, TaskStateSnapshot] = {}
        #: statistics
        self.history: collections.deque[CheckpointStats] = collections.deque(maxlen=HISTORY_SIZE)
        self.counts = {"completed": 0, "failed": 0, "restored": 0}
        self.latest_failed: CheckpointStats | None = None
        self.latest_completed: CheckpointStats | None = None
        self.latest_savepoint: CheckpointStats | None = None
        #: (checkpoint id, restore timestamp ms, external path, savepoint) of the last restore
        self.latest_restored: tuple[int, int, str, bool] | None = None

    # ---- queries ------------------------------------------------------------------------------------

    def location(self, checkpoint_id: int) -> str:
        return f"{self.settings.directory}/{self.job_id}/chk-{checkpoint_id}"

    def latest(self) -> CompletedCheckpoint | None:
        return self.completed[-1] if self.completed else None

    def in_progress(self) -> int:
        return len(self.pending)

    def stats(self, checkpoint_id: int) -> CheckpointStats | None:
        for s in self.history:
            if s.checkpoint_id == checkpoint_id:
                return s
        return None

    # ---- trigger ---------------------------------------------------------------------------------------

    def trigger(self, now_s: float, now_ms: int, tasks: Iterable[TaskToCheckpoint],
                savepoint_location: str | None = None, stop: str = "",
                ) -> tuple[int | None, str, list[CheckpointCommand]]:
        """Try to start a checkpoint (a savepoint when ``savepoint_location`` is given; with
        ``stop``, a stop-with-savepoint, see ``TriggerCheckpoint``).

        Returns:
            (checkpoint id, "", commands) when started, else (None, why not, []).
        """
        tasks = list(tasks)
        savepoint = savepoint_location is not None
        if not savepoint:
            if len(self.pending) >= self.settings.max_concurrent:
                return None, (f"{len(self.pending)} checkpoint(s) in progress (max-concurrent-"
                              f"checkpoints {self.settings.max_concurrent})"), []
            if (self._last_end_s is not None
                    and now_s - self._last_end_s < self.settings.min_pause_s):
                return None, "min pause between checkpoints not elapsed", []
        if not tasks:
            return None, "the job has no tasks", []
        not_running = [t for t in tasks
                       if t.state not in (ExecutionState.RUNNING, ExecutionState.FINISHED)]
        if not_running:
            return None, (f"Not all required tasks are currently running ({len(not_running)} of "
                          f"{len(tasks)} are not)"), []
        running = [t for t in tasks if t.state is ExecutionState.RUNNING]
        sources = [t for t in running if t.is_source]
        if not sources:
            return None, "no source subtask is running", []
        n = self.next_id
        self.next_id += 1
        location = savepoint_location or self.location(n)
        pending = _Pending(n, now_ms, location, savepoint, {t.attempt_id: t for t in tasks},
                           {t.attempt_id for t in running})
        for t in tasks:
            if t.state is ExecutionState.FINISHED:
                pending.acked[t.key] = self.finished_states.get(t.key,
                                                                TaskStateSnapshot(finished=True))
        self.pending[n] = pending
        stats = CheckpointStats(n, "IN_PROGRESS", savepoint, now_ms, len(tasks),
                                num_acknowledged=len(pending.acked), external_path=location)
        for t in tasks:
            v = str(t.attempt_id.job_vertex_id)
            stats.subtasks_per_vertex[v] = stats.subtasks_per_vertex.get(v, 0) + 1
            if t.state is ExecutionState.FINISHED:
                stats.acknowledged_per_vertex[v] = stats.acknowledged_per_vertex.get(v, 0) + 1
                stats.subtask_acks[t.key] = (now_ms, pending.acked[t.key].state_size)
        self.history.appendleft(stats)
        commands: list[CheckpointCommand] = [
            TriggerCheckpoint(t.task_executor_address, t.attempt_id, n, now_ms, location, stop)
            for t in sources]
        commands.append(ExpireCheckpoint(self.settings.timeout_s, n))
        return n, "", commands

    # ---- acknowledgements ----------------------------------------------------------------------------

    def acknowledge(self, attempt_id: ExecutionAttemptID, checkpoint_id: int,
                    snapshot: TaskStateSnapshot, now_ms: int) -> list[CheckpointCommand]:
        """A subtask's state at barrier ``checkpoint_id``. Late or unknown acknowledgements are
        ignored (the aborted checkpoint's directory is discarded as a whole)."""
        pending = self.pending.get(checkpoint_id)
        if pending is None or pending.finalizing or attempt_id not in pending.waiting:
            return []
        pending.waiting.discard(attempt_id)
        task = pending.tasks[attempt_id]
        pending.acked[task.key] = snapshot
        pending.latest_ack_ms = now_ms
        stats = self.stats(checkpoint_id)
        if stats is not None:
            v = str(attempt_id.job_vertex_id)
            stats.num_acknowledged += 1
            stats.latest_ack_timestamp_ms = now_ms
            stats.state_size += snapshot.state_size
            stats.acknowledged_per_vertex[v] = stats.acknowledged_per_vertex.get(v, 0) + 1
            stats.subtask_acks[task.key] = (now_ms, snapshot.state_size)
        if pending.waiting:
            return []
        pending.finalizing = True
        return [FinalizeCheckpoint(CompletedCheckpoint(
            self.job_id, checkpoint_id, pending.trigger_ms, now_ms, pending.location,
            dict(pending.acked), pending.savepoint))]

    def task_finished(self, attempt_id: ExecutionAttemptID, now_ms: int,
                      snapshot: TaskStateSnapshot | None = None) -> list[CheckpointCommand]:
        """A subtask ended with ``snapshot`` (``finished``, its files not yet published): it
        acknowledges every pending checkpoint it had not with it (it saw end of input on every
        channel instead of barrier n, so everything it emitted lies before the barrier
        downstream), and later checkpoints include it."""
        snapshot = snapshot or TaskStateSnapshot(finished=True)
        self.finished_states[subtask_key(attempt_id.job_vertex_id, attempt_id.subtask_index)] = \
            snapshot
        out: list[CheckpointCommand] = []
        for n in sorted(self.pending):
            pending = self.pending[n]
            if attempt_id in pending.waiting and not pending.finalizing:
                out += self.acknowledge(attempt_id, n, snapshot, now_ms)
        return out

    def finalized(self, checkpoint: CompletedCheckpoint, error: str | None, now_s: float,
                  now_ms: int) -> list[CheckpointCommand]:
        """The shell wrote ``_metadata`` (and committed the sinks) or failed to."""
        n = checkpoint.checkpoint_id
        pending = self.pending.pop(n, None)
        if pending is None:
            return []
        if error is not None:
            self.pending[n] = pending
            return self._abort(n, f"finalizing checkpoint {n} failed: {error}", now_s, now_ms,
                               counts=True)
        self._last_end_s = now_s
        self.consecutive_failures = 0
        out: list[CheckpointCommand] = []
        stats = self.stats(n)
        if stats is not None:
            stats.status = "COMPLETED"
            stats.latest_ack_timestamp_ms = max(stats.latest_ack_timestamp_ms, now_ms)
        self.counts["completed"] += 1  # savepoints count too, as in Flink's CheckpointStatsCounts
        if checkpoint.savepoint:
            self.latest_savepoint = stats
        else:
            self.latest_completed = stats
            self.completed.append(checkpoint)
            while len(self.completed) > self.settings.num_retained:
                subsumed = self.completed.popleft()
                if not subsumed.savepoint:  # a savepoint restored from is the user's to keep
                    out.append(DiscardCheckpoint(subsumed.external_pointer))
        # older pending checkpoints are subsumed (Flink aborts them as CHECKPOINT_SUBSUMED)
        for older in [m for m in self.pending if m < n and not pending.savepoint]:
            out += self._abort(older, f"subsumed by checkpoint {n}", now_s, now_ms, counts=False)
        out += [NotifyCheckpoint(t.task_executor_address, a, n, True)
                for a, t in pending.tasks.items() if t.state is ExecutionState.RUNNING]
        return out

    # ---- failures --------------------------------------------------------------------------------------

    def decline(self, attempt_id: ExecutionAttemptID, checkpoint_id: int, reason: str,
                now_s: float, now_ms: int) -> list[CheckpointCommand]:
        """A subtask could not take its snapshot (Flink ``declineCheckpoint``)."""
        pending = self.pending.get(checkpoint_id)
        if pending is None or pending.finalizing or attempt_id not in pending.tasks:
            return []
        return self._abort(checkpoint_id, f"declined by {pending.tasks[attempt_id].key}: {reason}",
                           now_s, now_ms, counts=True)

    def expire(self, checkpoint_id: int, now_s: float, now_ms: int) -> list[CheckpointCommand]:
        """The timeout of ``checkpoint_id`` elapsed."""
        pending = self.pending.get(checkpoint_id)
        if pending is None or pending.finalizing:
            return []
        return self._abort(checkpoint_id, f"Checkpoint expired before completing "
                           f"(execution.checkpointing.timeout {self.settings.timeout_s:g} s; "
                           f"{len(pending.waiting)} subtask(s) had not acknowledged)",
                           now_s, now_ms, counts=True)

    def abort_all(self, reason: str, now_s: float, now_ms: int) -> list[CheckpointCommand]:
        """Abort every pending checkpoint without counting a failure (a failover, job end)."""
        out: list[CheckpointCommand] = []
        for n in sorted(self.pending):
            if not self.pending[n].finalizing:
                out += self._abort(n, reason, now_s, now_ms, counts=False)
        return out

    def _abort(self, n: int, reason: str, now_s: float, now_ms: int,
               counts: bool) -> list[CheckpointCommand]:
        pending = self.pending.pop(n)
        self._last_end_s = now_s
        log.info("job %s: checkpoint %d aborted: %s", self.job_id, n, reason)
        stats = self.stats(n)
        if stats is not None:
            stats.status = "FAILED"
            stats.failure_timestamp_ms = now_ms
            stats.failure_message = reason
            self.latest_failed = stats
        self.counts["failed"] += 1
        out: list[CheckpointCommand] = [DiscardCheckpoint(pending.location)]
        out += [NotifyCheckpoint(t.task_executor_address, a, n, False)
                for a, t in pending.tasks.items() if t.state is ExecutionState.RUNNING]
        if counts and not pending.savepoint:
            self.consecutive_failures += 1
            if self.consecutive_failures > self.settings.tolerable_failures:
                self.consecutive_failures = 0
                out.append(FailJobGlobally(
                    f"Exceeded checkpoint tolerable failure threshold "
                    f"(execution.checkpointing.tolerable-failed-checkpoints "
                    f"{self.settings.tolerable_failures}); last: checkpoint {n} {reason}"))
        return out

    # ---- restore ---------------------------------------------------------------------------------------

    def restore_latest(self, now_ms: int, subtasks: Iterable[Any] = ()) -> CompletedCheckpoint | None:
        """Restart ``subtasks`` (ExecutionVertexIDs) from the newest completed checkpoint (None:
        from scratch). Their finished states are forgotten: a restarted subtask's old files are
        not its output any more."""
        for v in subtasks:
            self.finished_states.pop(subtask_key(v.job_vertex_id, v.subtask_index), None)
        latest = self.latest()
        if latest is not None:
            self.counts["restored"] += 1
            self.latest_restored = (latest.checkpoint_id, now_ms, latest.external_pointer,
                                    latest.savepoint)
        return latest

    def add_restored(self, checkpoint: CompletedCheckpoint, now_ms: int) -> None:
        """Start from a checkpoint or savepoint given at submission (``flintlock run -s``): it
        is what the job restores until a newer checkpoint completes."""
        self.completed.append(checkpoint)
        self.next_id = max(self.next_id, checkpoint.checkpoint_id + 1)
        self.counts["restored"] += 1
        self.latest_restored = (checkpoint.checkpoint_id, now_ms, checkpoint.external_pointer,
                                checkpoint.savepoint)
