"""Live metrics of running streaming subtasks, reported by TaskExecutors to JobMasters.

A STREAMING task counts what it does while it runs (``StreamingTaskStats``: records and bytes in
and out, and the milliseconds it spent busy, back-pressured and idle). Every
``metrics.task.report-interval`` (1 s) its TaskExecutor turns the counters into a
``LiveTaskMetrics`` per attempt (``LiveMetricsReporter``, a pure core: per-second rates over the
interval since the previous report, Flink's ``busyTimeMsPerSecond`` /
``backPressuredTimeMsPerSecond`` / ``idleTimeMsPerSecond`` and ``numRecordsInPerSecond``) and
sends them to the job's JobMaster, which keeps the newest one with the current attempt; REST and
the CLI read them there (Flink's MetricFetcher role; Flink reports through metric query services).

Watermarks are epoch ms; ``None`` means "no watermark yet" (Flink reports ``Long.MIN_VALUE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flintlock.runtime.ids import ExecutionAttemptID
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

__all__ = ["MIN_WATERMARK_METRIC", "LiveMetricsReporter", "LiveTaskMetrics", "backpressure_level"]

#: what Flink's ``currentInputWatermark`` shows before the first watermark (Long.MIN_VALUE)
MIN_WATERMARK_METRIC = -(2**63)


@dataclass(frozen=True)
class LiveTaskMetrics:
    """One running attempt's metrics at ``timestamp_ms`` (counts cumulative, rates per second;
    ``accumulated_*_ms``: the ms spent back-pressured and idle since the attempt started, Flink's
    ``accumulateBackPressuredTimeMs`` / ``accumulateIdleTimeMs``)."""

    attempt_id: ExecutionAttemptID
    timestamp_ms: int
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    busy_ms_per_second: float = 0.0
    back_pressured_ms_per_second: float = 0.0
    idle_ms_per_second: float = 0.0
    records_in_per_second: float = 0.0
    records_out_per_second: float = 0.0
    epochs: int = 0
    input_watermark: int | None = None
    output_watermark: int | None = None
    accumulated_back_pressured_ms: float = 0.0
    accumulated_idle_ms: float = 0.0

    def io(self) -> IOMetrics:
        """The report's counts (what the attempt processed so far)."""
        return IOMetrics(self.records_in, self.records_out, self.bytes_in, self.bytes_out)


def backpressure_level(ratio: float) -> str:
    """Flink's ``JobVertexBackPressureHandler`` levels: ok < 0.1 <= low <= 0.5 < high."""
    if ratio < 0.10:
        return "ok"
    return "low" if ratio <= 0.5 else "high"


@dataclass
class _Previous:
    timestamp_ms: int
    busy_ms: float
    back_pressured_ms: float
    idle_ms: float
    records_in: int
    records_out: int


class LiveMetricsReporter:
    """Turns cumulative task counters into ``LiveTaskMetrics`` with per-second rates (pure)."""

    def __init__(self) -> None:
        self._previous: dict[ExecutionAttemptID, _Previous] = {}

    def sample(self, attempt_id: ExecutionAttemptID, stats: Any, now_ms: int,
               started_ms: int) -> LiveTaskMetrics:
        """``stats``: a ``StreamingTaskStats`` (read without locking: ints and floats written by
        the task thread); ``started_ms``: when the attempt started (the first interval's start)."""
        prev = self._previous.get(attempt_id) or _Previous(started_ms, 0.0, 0.0, 0.0, 0, 0)
        busy, bp, idle = float(stats.busy_ms), float(stats.back_pressured_ms), float(stats.idle_ms)
        rin, rout = int(stats.records_in), int(stats.records_out)
        elapsed_s = max(0.001, (now_ms - prev.timestamp_ms) / 1000.0)

        def per_second(now: float, before: float, cap: float | None = 1000.0) -> float:
            rate = max(0.0, now - before) / elapsed_s
            return min(cap, rate) if cap is not None else rate

        self._previous[attempt_id] = _Previous(now_ms, busy, bp, idle, rin, rout)
        return LiveTaskMetrics(
            attempt_id=attempt_id, timestamp_ms=now_ms, records_in=rin, records_out=rout,
            bytes_in=int(stats.bytes_in), bytes_out=int(stats.bytes_out),
            busy_ms_per_second=per_second(busy, prev.busy_ms),
            back_pressured_ms_per_second=per_second(bp, prev.back_pressured_ms),
            idle_ms_per_second=per_second(idle, prev.idle_ms),
            records_in_per_second=per_second(rin, prev.records_in, None),
            records_out_per_second=per_second(rout, prev.records_out, None),
            epochs=int(stats.epochs), input_watermark=stats.input_watermark,
            output_watermark=stats.output_watermark,
            accumulated_back_pressured_ms=bp, accumulated_idle_ms=idle,
        )

    def retain(self, attempts: set[ExecutionAttemptID]) -> None:
        """Forget attempts that no longer run."""
        for a in [a for a in self._previous if a not in attempts]:
            del self._previous[a]
