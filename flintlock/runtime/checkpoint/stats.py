"""Checkpoint statistics for REST and metrics: a frozen ``CheckpointStatsSnapshot`` of a coordinator.

Follows Flink ``runtime/checkpoint/CheckpointStatsSnapshot`` (with ``CheckpointStatsCounts``,
``CheckpointStatsHistory``, ``AbstractCheckpointStats`` and its Pending / Completed / Failed
subclasses, ``TaskStateStats``, ``SubtaskStateStats``, ``RestoredCheckpointStats``) and
``jobgraph/tasks/CheckpointCoordinatorConfiguration``. ``snapshot_stats(coordinator)`` copies what
the JobMaster's ``CheckpointCoordinator`` records into plain frozen dataclasses (builtins only), so
the snapshot rides in an ``ArchivedExecutionGraph`` over the RPC codec. Pure: no I/O, no clock.

Units: timestamps are epoch ms, durations ms, sizes bytes. ``-1`` means "none / not known"
(Flink's convention: a latest acknowledgement before any subtask acknowledged, the duration of a
pending checkpoint no subtask acknowledged yet, the ``last*`` metrics before the first checkpoint).

Per subtask, the coordinator records when it acknowledged and its state's bytes (a FINISHED
subtask acknowledges at the trigger). What it does not record, and so the snapshot cannot carry:
alignment, processed and persisted (unaligned) data, and the synchronous / asynchronous parts of
a snapshot: flintlock aligns barriers without buffering spilled data and copies state
synchronously between epochs, so these are ``0`` (the whole snapshot counts as synchronous).

Checkpoints are full copies of the operators' state tables, so a checkpoint's checkpointed size
equals its state size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the coordinator is only read; no import cycle at runtime
    from flintlock.runtime.checkpoint.coordinator import (
        CheckpointCoordinator,
        CheckpointSettings,
        CheckpointStats,
    )

__all__ = [
    "ArchivedCheckpointStats",
    "CheckpointCoordinatorConfiguration",
    "CheckpointStatsCounts",
    "CheckpointStatsSnapshot",
    "RestoredCheckpointStats",
    "StatsSummary",
    "SubtaskStateStats",
    "TaskStateStats",
    "checkpoint_metric_values",
    "snapshot_stats",
    "summarize",
]

#: status of an ``ArchivedCheckpointStats`` (Flink ``CheckpointStatsStatus``)
IN_PROGRESS, COMPLETED, FAILED = "IN_PROGRESS", "COMPLETED", "FAILED"


@dataclass(frozen=True)
class CheckpointCoordinatorConfiguration:
    """The job's checkpointing configuration (Flink ``CheckpointCoordinatorConfiguration``).

    Attributes:
        interval_ms: ``execution.checkpointing.interval`` (ms).
        timeout_ms: ``execution.checkpointing.timeout`` (ms).
        min_pause_ms: ``execution.checkpointing.min-pause`` (ms).
        max_concurrent: ``execution.checkpointing.max-concurrent-checkpoints``.
        mode: ``"EXACTLY_ONCE"`` or ``"AT_LEAST_ONCE"``.
        retention: ``execution.checkpointing.externalized-checkpoint-retention``
            (``NO_EXTERNALIZED_CHECKPOINTS``, ``RETAIN_ON_CANCELLATION``, ``DELETE_ON_CANCELLATION``).
        tolerable_failures: ``execution.checkpointing.tolerable-failed-checkpoints``.
        num_retained: ``state.checkpoints.num-retained``.
        directory: where ``<job>/chk-<n>`` go (``state.checkpoints.dir``).
    """

    interval_ms: int
    timeout_ms: int
    min_pause_ms: int
    max_concurrent: int
    mode: str
    retention: str
    tolerable_failures: int
    num_retained: int
    directory: str

    @property
    def exactly_once(self) -> bool:
        return self.mode == "EXACTLY_ONCE"

    @property
    def retained_on_cancellation(self) -> bool:
        """Whether checkpoints outlive a cancelled or failed job (the JobMaster's checkpoint
        shell keeps them only for ``RETAIN_ON_CANCELLATION``; finished jobs always discard)."""
        return self.retention == "RETAIN_ON_CANCELLATION"

    @classmethod
    def from_settings(cls, settings: CheckpointSettings) -> CheckpointCoordinatorConfiguration:
        return cls(  # periodic checkpoints off: Flink reports the interval as Long.MAX_VALUE
            interval_ms=2**63 - 1 if settings.interval_s is None else _ms(settings.interval_s),
            timeout_ms=_ms(settings.timeout_s),
            min_pause_ms=_ms(settings.min_pause_s),
            max_concurrent=int(settings.max_concurrent),
            mode=str(settings.mode),
            retention=str(settings.retention),
            tolerable_failures=int(settings.tolerable_failures),
            num_retained=int(settings.num_retained),
            directory=str(settings.directory),
        )


@dataclass(frozen=True)
class SubtaskStateStats:
    """One acknowledged subtask's part of a checkpoint (Flink ``SubtaskStateStats``).

    Attributes:
        index: its subtask index.
        ack_timestamp_ms: when its acknowledgement arrived (epoch ms).
        state_size: bytes of its state.
    """

    index: int
    ack_timestamp_ms: int
    state_size: int


@dataclass(frozen=True)
class TaskStateStats:
    """One job vertex's part of a checkpoint (Flink ``TaskStateStats``).

    Attributes:
        job_vertex_id: the vertex (32 hex).
        num_subtasks: its subtasks in the checkpoint.
        num_acknowledged: those that acknowledged (FINISHED ones count from the trigger on).
        state_size: bytes of the acknowledged subtasks' state.
        latest_ack_timestamp_ms: the last acknowledgement (epoch ms), ``-1`` before the first.
        subtasks: the acknowledged subtasks, by index (the others are pending or failed).
    """

    job_vertex_id: str
    num_subtasks: int
    num_acknowledged: int
    state_size: int = 0
    latest_ack_timestamp_ms: int = -1
    subtasks: tuple[SubtaskStateStats, ...] = ()

    @property
    def checkpointed_size(self) -> int:
        return self.state_size

    def end_to_end_duration_ms(self, trigger_timestamp_ms: int) -> int:
        """ms from the trigger to the vertex's latest acknowledgement; ``-1`` when not known."""
        if self.latest_ack_timestamp_ms < 0:
            return -1
        return max(0, self.latest_ack_timestamp_ms - trigger_timestamp_ms)


@dataclass(frozen=True)
class ArchivedCheckpointStats:
    """One checkpoint or savepoint (Flink ``AbstractCheckpointStats`` and its Pending /
    Completed / Failed subclasses, told apart by ``status``).

    Attributes:
        checkpoint_id: n (1, 2, ...).
        status: ``"IN_PROGRESS"``, ``"COMPLETED"`` or ``"FAILED"``.
        savepoint: taken as a savepoint.
        trigger_timestamp_ms: when it was triggered (epoch ms).
        latest_ack_timestamp_ms: the last acknowledgement (the completion for a completed
            one); ``-1`` before any.
        state_size: bytes of all acknowledged subtask states.
        num_subtasks, num_acknowledged: subtasks in it / those that acknowledged.
        external_path: its directory (``<dir>/<job>/chk-<n>``; the target of a savepoint).
        discarded: a completed checkpoint no longer retained (subsumed; its files deleted).
        failure_timestamp_ms: when it failed (epoch ms), ``-1`` unless FAILED.
        failure_message: why it failed ("" unless FAILED).
        tasks: per job vertex, in first-seen order.
    """

    checkpoint_id: int
    status: str
    savepoint: bool
    trigger_timestamp_ms: int
    latest_ack_timestamp_ms: int
    state_size: int
    num_subtasks: int
    num_acknowledged: int
    external_path: str = ""
    discarded: bool = False
    failure_timestamp_ms: int = -1
    failure_message: str = ""
    tasks: tuple[TaskStateStats, ...] = ()

    @property
    def checkpointed_size(self) -> int:
        return self.state_size

    @property
    def end_to_end_duration_ms(self) -> int:
        """Flink's rule: a failed checkpoint lasted until it failed; otherwise until its latest
        acknowledgement (a completed one's is its completion); ``-1`` while none arrived."""
        if self.status == FAILED:
            return max(0, self.failure_timestamp_ms - self.trigger_timestamp_ms)
        if self.latest_ack_timestamp_ms < 0:
            return -1
        return max(0, self.latest_ack_timestamp_ms - self.trigger_timestamp_ms)

    def task(self, job_vertex_id: str) -> TaskStateStats | None:
        for t in self.tasks:
            if t.job_vertex_id == job_vertex_id:
                return t
        return None


@dataclass(frozen=True)
class RestoredCheckpointStats:
    """The checkpoint the job last restored from (Flink ``RestoredCheckpointStats``)."""

    checkpoint_id: int
    restore_timestamp_ms: int
    external_path: str
    savepoint: bool


@dataclass(frozen=True)
class CheckpointStatsCounts:
    """How many checkpoints the job had (Flink ``CheckpointStatsCounts``; savepoints are
    counted as the coordinator counts them)."""

    restored: int = 0
    completed: int = 0
    failed: int = 0
    in_progress: int = 0

    @property
    def total(self) -> int:
        return self.completed + self.failed + self.in_progress


@dataclass(frozen=True)
class StatsSummary:
    """min / max / avg and percentiles of some values (Flink ``StatsSummarySnapshot`` as REST's
    ``StatsSummaryDto`` shows it). All zeros over no values."""

    count: int = 0
    min: int = 0
    max: int = 0
    avg: int = 0
    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    p999: float = 0.0


@dataclass(frozen=True)
class CheckpointStatsSnapshot:
    """A job's checkpoint statistics at one moment (Flink ``CheckpointStatsSnapshot``).

    Attributes:
        config: the checkpointing configuration; ``None`` when the job does not checkpoint
            (a BATCH job; every STREAMING job can take checkpoints and savepoints, periodic
            ones only with ``execution.checkpointing.interval``).
        counts: see ``CheckpointStatsCounts``.
        history: the latest checkpoints, newest first (at most ``web.checkpoints.history``, 10).
        latest_completed: the newest completed checkpoint (not a savepoint); None before one.
        latest_savepoint: the newest completed savepoint.
        latest_failed: the newest failed checkpoint or savepoint.
        latest_restored: what the job last restored from.
    """

    config: CheckpointCoordinatorConfiguration | None = None
    counts: CheckpointStatsCounts = CheckpointStatsCounts()
    history: tuple[ArchivedCheckpointStats, ...] = ()
    latest_completed: ArchivedCheckpointStats | None = None
    latest_savepoint: ArchivedCheckpointStats | None = None
    latest_failed: ArchivedCheckpointStats | None = None
    latest_restored: RestoredCheckpointStats | None = None

    @property
    def enabled(self) -> bool:
        return self.config is not None

    def checkpoint(self, checkpoint_id: int) -> ArchivedCheckpointStats | None:
        """Checkpoint ``checkpoint_id`` from the history or the latest ones (None: unknown)."""
        for s in (*self.history, self.latest_completed, self.latest_savepoint, self.latest_failed):
            if s is not None and s.checkpoint_id == checkpoint_id:
                return s
        return None

    def completed_in_history(self) -> list[ArchivedCheckpointStats]:
        return [s for s in self.history if s.status == COMPLETED]

    def state_size_summary(self) -> StatsSummary:
        return summarize(s.state_size for s in self.completed_in_history())

    def checkpointed_size_summary(self) -> StatsSummary:
        return summarize(s.checkpointed_size for s in self.completed_in_history())

    def end_to_end_duration_summary(self) -> StatsSummary:
        return summarize(s.end_to_end_duration_ms for s in self.completed_in_history())


# ---- building ---------------------------------------------------------------------------------------


def snapshot_stats(coordinator: CheckpointCoordinator) -> CheckpointStatsSnapshot:
    """Copy ``coordinator``'s statistics (history, counts, latest ones, configuration).

    Call it in the JobMaster's mailbox (the coordinator is not thread-safe); the result is
    immutable and shares nothing with the coordinator.
    """
    retained = {c.checkpoint_id for c in coordinator.completed if not c.savepoint}

    def archive(s: CheckpointStats) -> ArchivedCheckpointStats:
        return _archive(s, discarded=(s.status == COMPLETED and not s.savepoint
                                      and s.checkpoint_id not in retained))

    history = tuple(archive(s) for s in coordinator.history)
    by_id = {s.checkpoint_id: s for s in history}

    def latest(s: CheckpointStats | None) -> ArchivedCheckpointStats | None:
        if s is None:
            return None
        return by_id.get(s.checkpoint_id) or archive(s)

    restored = None
    if coordinator.latest_restored is not None:
        n, ts, path, savepoint = coordinator.latest_restored
        restored = RestoredCheckpointStats(int(n), int(ts), str(path), bool(savepoint))
    counts = coordinator.counts
    return CheckpointStatsSnapshot(
        config=CheckpointCoordinatorConfiguration.from_settings(coordinator.settings),
        counts=CheckpointStatsCounts(
            restored=int(counts.get("restored", 0)),
            completed=int(counts.get("completed", 0)),
            failed=int(counts.get("failed", 0)),
            in_progress=len(coordinator.pending),
        ),
        history=history,
        latest_completed=latest(coordinator.latest_completed),
        latest_savepoint=latest(coordinator.latest_savepoint),
        latest_failed=latest(coordinator.latest_failed),
        latest_restored=restored,
    )


def _archive(s: CheckpointStats, discarded: bool) -> ArchivedCheckpointStats:
    acks: dict[str, list[SubtaskStateStats]] = {}
    for key, (ack_ms, size) in s.subtask_acks.items():
        vertex, _, index = key.rpartition("/")
        acks.setdefault(vertex, []).append(SubtaskStateStats(int(index), int(ack_ms), int(size)))
    tasks = []
    for vertex, n in s.subtasks_per_vertex.items():
        subtasks = tuple(sorted(acks.get(vertex, ()), key=lambda a: a.index))
        tasks.append(TaskStateStats(
            vertex, int(n), int(s.acknowledged_per_vertex.get(vertex, 0)),
            sum(a.state_size for a in subtasks),
            max((a.ack_timestamp_ms for a in subtasks), default=-1), subtasks))
    failed = s.status == FAILED
    return ArchivedCheckpointStats(
        checkpoint_id=int(s.checkpoint_id),
        status=str(s.status),
        savepoint=bool(s.savepoint),
        trigger_timestamp_ms=int(s.trigger_timestamp_ms),
        latest_ack_timestamp_ms=int(s.latest_ack_timestamp_ms) or -1,
        state_size=int(s.state_size),
        num_subtasks=int(s.num_subtasks),
        num_acknowledged=int(s.num_acknowledged),
        external_path=str(s.external_path),
        discarded=discarded,
        failure_timestamp_ms=int(s.failure_timestamp_ms) if failed else -1,
        failure_message=str(s.failure_message) if failed else "",
        tasks=tuple(tasks),
    )


def _ms(seconds: float) -> int:
    return int(round(float(seconds) * 1000))


# ---- summaries and metrics -------------------------------------------------------------------------


def summarize(values: Iterable[int]) -> StatsSummary:
    """min / max / avg (integer, Flink ``StatsSummary``) and percentiles by the estimation
    Flink's ``DescriptiveStatisticsHistogram`` uses (commons-math ``Percentile``, LEGACY: position
    ``p * (n + 1)``, linear interpolation). Zeros over no values."""
    ordered = sorted(int(v) for v in values)
    if not ordered:
        return StatsSummary()
    return StatsSummary(
        count=len(ordered), min=ordered[0], max=ordered[-1], avg=sum(ordered) // len(ordered),
        p50=_percentile(ordered, 0.5), p90=_percentile(ordered, 0.9),
        p95=_percentile(ordered, 0.95), p99=_percentile(ordered, 0.99),
        p999=_percentile(ordered, 0.999))


def _percentile(ordered: list[int], quantile: float) -> float:
    n = len(ordered)
    pos = quantile * (n + 1)
    if pos < 1:
        return float(ordered[0])
    if pos >= n:
        return float(ordered[-1])
    lower_index = int(pos)
    lower, upper = ordered[lower_index - 1], ordered[lower_index]
    return float(lower + (pos - lower_index) * (upper - lower))


def checkpoint_metric_values(stats: CheckpointStatsSnapshot | None) -> dict[str, float]:
    """Job-scope checkpoint metrics with Flink's names (``CheckpointStatsTracker`` gauges).

    ``numberOfInProgressCheckpoints``, ``numberOfCompletedCheckpoints``,
    ``numberOfFailedCheckpoints``, ``totalNumberOfCheckpoints`` (counts);
    ``lastCheckpointDuration`` (ms) and ``lastCheckpointSize`` (bytes) of the newest completed
    checkpoint, ``lastCheckpointRestoreTimestamp`` (epoch ms) of the last restore: ``-1`` before
    there is one. A job without checkpointing has none of them (``{}``), as Flink registers them
    with the job's checkpoint statistics tracker.
    """
    if stats is None:
        return {}
    latest = stats.latest_completed
    restored = stats.latest_restored
    return {
        "lastCheckpointDuration": float(latest.end_to_end_duration_ms if latest else -1),
        "lastCheckpointSize": float(latest.checkpointed_size if latest else -1),
        "lastCheckpointRestoreTimestamp": float(restored.restore_timestamp_ms if restored else -1),
        "numberOfInProgressCheckpoints": float(stats.counts.in_progress),
        "numberOfCompletedCheckpoints": float(stats.counts.completed),
        "numberOfFailedCheckpoints": float(stats.counts.failed),
        "totalNumberOfCheckpoints": float(stats.counts.total),
    }
