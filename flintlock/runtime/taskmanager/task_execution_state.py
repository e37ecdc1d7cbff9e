"""What a Task reports to its JobMaster: state changes, results and errors.

Follows Flink ``runtime/taskmanager/TaskExecutionState`` and ``SerializedThrowable``: errors cross
component boundaries as ``SerializedError`` (type name, message, traceback text), never as pickled
exception objects.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field

from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.ids import ExecutionAttemptID, JobID
from flintlock.runtime.jobgraph.types import ExecutionState

__all__ = ["IOMetrics", "SerializedError", "TaskExecutionState", "TaskResult"]


@dataclass(frozen=True)
class SerializedError:
    """An exception as text: ``class_name`` (qualified), ``message``, ``traceback`` text.

    ``non_recoverable`` marks errors that restarting cannot fix (a missing column, a function that
    cannot be unpickled); restart strategies fail the job at once for them.
    ``partition_not_found`` carries the dataset/partition text of a PartitionNotFound error.
    """

    class_name: str
    message: str
    traceback: str = ""
    non_recoverable: bool = False
    partition_not_found: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException, *, non_recoverable: bool | None = None) -> SerializedError:
        cls_ = type(exc)
        name = f"{cls_.__module__}.{cls_.__qualname__}" if cls_.__module__ != "builtins" else cls_.__qualname__
        tb = "".join(traceback.format_exception(cls_, exc, exc.__traceback__))
        nr = getattr(exc, "non_recoverable", False) if non_recoverable is None else non_recoverable
        pnf = getattr(exc, "partition_not_found", None)
        return cls(name, str(exc), tb, bool(nr), pnf)

    def short(self) -> str:
        return f"{self.class_name}: {self.message}"


@dataclass(frozen=True)
class IOMetrics:
    """Flink's task I/O metrics: numRecordsIn/Out and numBytesIn/Out (bytes as stored)."""

    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0

    @classmethod
    def of_counters(cls, stats: object) -> IOMetrics | None:
        """The counts of a task's live counters (``stats`` of a streaming or batch invokable:
        ``records_in``, ``records_out``, ``bytes_in``, ``bytes_out``), or None without them."""
        if stats is None:
            return None
        try:
            return cls(int(stats.records_in), int(stats.records_out),  # type: ignore[attr-defined]
                       int(stats.bytes_in), int(stats.bytes_out))  # type: ignore[attr-defined]
        except (AttributeError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class TaskResult:
    """What a FINISHED attempt produced.

    Attributes:
        partitions: one location per produced partition, in output order.
        committables: per sink index of the vertex, what the JobMaster commits (e.g. the attempt's
            temporary directory of a FileSink); picklable, connector-defined.
        accumulators: name -> bytes (e.g. ``collect-<uid>`` -> Arrow IPC stream of collected rows).
        metrics: I/O metrics of the attempt.
    """

    partitions: tuple[PartitionLocation, ...] = ()
    committables: Mapping[int, object] = field(default_factory=dict)
    accumulators: Mapping[str, bytes] = field(default_factory=dict)
    metrics: IOMetrics = field(default_factory=IOMetrics)


@dataclass(frozen=True)
class TaskExecutionState:
    """A state change of one attempt, reported by the TaskExecutor to the JobMaster.

    ``result`` is set with FINISHED, ``error`` with FAILED. ``metrics`` carries what a CANCELED or
    FAILED attempt processed until it ended (Flink's ``TaskExecutionState.ioMetrics``; a FINISHED
    attempt's are in ``result``). ``task_manager`` names the reporting TaskManager's ResourceID,
    for error messages.
    """

    job_id: JobID
    attempt_id: ExecutionAttemptID
    state: ExecutionState
    error: SerializedError | None = None
    result: TaskResult | None = None
    task_manager: str = ""
    metrics: IOMetrics | None = None
