"""Task metrics with Flink's names, computed from attempt snapshots (pure functions, no I/O).

Metrics of one subtask attempt (Flink ``TaskIOMetricGroup``):

- ``numRecordsIn``, ``numRecordsOut``, ``numBytesIn``, ``numBytesOut``: what the attempt read and
  wrote (records; bytes as stored in result partitions / sources). A BATCH subtask runs its chain
  as one Spark plan, so these are known when the attempt FINISHES and are 0 before; a STREAMING
  subtask reports them live (``live_task_metrics``, every ``metrics.task.report-interval``).
- ``busyTimeMsPerSecond``, ``backPressuredTimeMsPerSecond``, ``idleTimeMsPerSecond`` (ms per
  second, 0..1000): STREAMING: the measured shares of the last interval spent running epochs,
  waiting for credit and waiting for input. BATCH: 1000 / 0 / 0 while RUNNING (the task thread
  waits on its Spark work, which is busy time; a Spark plan neither idles nor is back-pressured
  in a way flintlock measures), else 0 / 0 / 0.
- ``numRecordsInPerSecond``, ``numRecordsOutPerSecond``, ``numBytesInPerSecond``,
  ``numBytesOutPerSecond`` (per second): STREAMING: records over the last interval; bytes are
  approximated as that record rate times the attempt's average record size so far (bytes /
  records; flintlock counts bytes but reports no byte rate). Otherwise (BATCH, or STREAMING
  before its first report): the attempt's counts divided by its time RUNNING, i.e. the average
  rate over its run (Flink's 60 s ``MeterView``, which after a task ends keeps showing its last
  rate); 0 until the counts are known, which for BATCH is when the attempt finishes.
- ``currentInputWatermark``, ``currentOutputWatermark`` (STREAMING, ms; Long.MIN_VALUE before
  the first).
- ``accumulateBusyTimeMs``, ``accumulateBackPressuredTimeMs``, ``accumulateIdleTimeMs``: the ms
  spent RUNNING (to the end of RUNNING, or to now) split as Flink splits a task's time: the
  back-pressured and idle ms a STREAMING attempt accumulated (its last live report, kept after it
  ended), and the rest busy; a BATCH attempt is busy for all its time RUNNING.

REST query helpers follow Flink's metric handlers: ``get=a,b`` selects metrics, ``agg=min,max``
picks aggregations (``min``, ``max``, ``sum``, ``avg``, ``skew``: Flink ``DoubleDataSkew``, the
mean absolute deviation in % of the mean, capped at 100), ``subtasks=0,2-4`` selects subtasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from flintlock.runtime.executiongraph.archived import ArchivedExecution, ArchivedJobVertex
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.metrics.live_task_metrics import MIN_WATERMARK_METRIC, LiveTaskMetrics
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

__all__ = [
    "AGGREGATIONS",
    "LIVE_TASK_METRICS",
    "TASK_METRICS",
    "accumulated_times",
    "aggregate",
    "attempt_metrics",
    "busy_time_ms",
    "execution_metrics",
    "format_metric_value",
    "metric_list",
    "parse_aggregations",
    "parse_metric_names",
    "parse_subtask_ranges",
    "vertex_metrics",
]

#: Flink's names of the task metrics every attempt has, in display order (the web dashboard's
#: job graph asks ``subtasks/metrics`` for ``backPressuredTimeMsPerSecond``,
#: ``busyTimeMsPerSecond`` and ``numRecordsInPerSecond`` of every vertex)
TASK_METRICS = ("numRecordsIn", "numRecordsOut", "numBytesIn", "numBytesOut",
                "busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond",
                "numRecordsInPerSecond", "numRecordsOutPerSecond", "numBytesInPerSecond",
                "numBytesOutPerSecond", "accumulateBusyTimeMs", "accumulateBackPressuredTimeMs",
                "accumulateIdleTimeMs")
#: what running STREAMING subtasks add (``live_task_metrics``)
LIVE_TASK_METRICS = ("currentInputWatermark", "currentOutputWatermark")
#: Flink's aggregation modes (``AggregationMode``), lower case as in the query parameter
AGGREGATIONS = ("min", "max", "avg", "sum", "skew")

_MAX_NAMES = 1000
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_RANGE = re.compile(r"^[ \t]*([0-9]{1,9})[ \t]*(?:-[ \t]*([0-9]{1,9})[ \t]*)?$")
#: what query values may be padded with (ASCII only, as the OpenAPI patterns say)
_BLANK = " \t"
_END_OF_RUNNING = ("CANCELING", "FINISHED", "FAILED", "CANCELED")


def busy_time_ms(state: ExecutionState, state_timestamps: Mapping[str, int], now_ms: int) -> int:
    """Milliseconds the attempt spent RUNNING (so far, while it still runs)."""
    started = int(state_timestamps.get("RUNNING", 0))
    if started <= 0:
        return 0
    if state is ExecutionState.RUNNING:
        return max(0, now_ms - started)
    ends = [int(state_timestamps[s]) for s in _END_OF_RUNNING
            if int(state_timestamps.get(s, 0)) >= started]
    return max(0, min(ends) - started) if ends else 0


def accumulated_times(execution: ArchivedExecution, now_ms: int) -> tuple[float, float, float]:
    """(busy, back-pressured, idle) ms of an attempt: its time RUNNING less the back-pressured
    and idle ms of its last live report (which cannot exceed it), and those two."""
    running_ms = busy_time_ms(execution.state, execution.state_timestamps, now_ms)
    back_pressured = min(float(running_ms), max(0.0, execution.accumulated_back_pressured_ms))
    idle = min(running_ms - back_pressured, max(0.0, execution.accumulated_idle_ms))
    return running_ms - back_pressured - idle, back_pressured, idle


def attempt_metrics(io: IOMetrics, state: ExecutionState, state_timestamps: Mapping[str, int],
                    now_ms: int, live: LiveTaskMetrics | None = None,
                    times: tuple[float, float, float] | None = None) -> dict[str, float]:
    """The ``TASK_METRICS`` of one attempt, plus ``LIVE_TASK_METRICS`` when ``live`` is given
    (meanings, units and approximations: the module docstring); ``times``: its
    ``accumulated_times`` (default: busy for all its time RUNNING)."""
    running_ms = busy_time_ms(state, state_timestamps, now_ms)
    busy, back_pressured, idle = times if times is not None else (float(running_ms), 0.0, 0.0)

    def average_per_second(count: int) -> float:
        return count * 1000.0 / running_ms if running_ms > 0 else 0.0

    values = {
        "numRecordsIn": float(io.records_in),
        "numRecordsOut": float(io.records_out),
        "numBytesIn": float(io.bytes_in),
        "numBytesOut": float(io.bytes_out),
        "busyTimeMsPerSecond": 1000.0 if state is ExecutionState.RUNNING else 0.0,
        "backPressuredTimeMsPerSecond": 0.0,
        "idleTimeMsPerSecond": 0.0,
        "numRecordsInPerSecond": average_per_second(io.records_in),
        "numRecordsOutPerSecond": average_per_second(io.records_out),
        "numBytesInPerSecond": average_per_second(io.bytes_in),
        "numBytesOutPerSecond": average_per_second(io.bytes_out),
        "accumulateBusyTimeMs": busy,
        "accumulateBackPressuredTimeMs": back_pressured,
        "accumulateIdleTimeMs": idle,
    }
    if live is not None:
        mark = MIN_WATERMARK_METRIC
        values.update({
            "numRecordsIn": float(live.records_in), "numRecordsOut": float(live.records_out),
            "numBytesIn": float(live.bytes_in), "numBytesOut": float(live.bytes_out),
            "busyTimeMsPerSecond": live.busy_ms_per_second,
            "backPressuredTimeMsPerSecond": live.back_pressured_ms_per_second,
            "idleTimeMsPerSecond": live.idle_ms_per_second,
            "numRecordsInPerSecond": live.records_in_per_second,
            "numRecordsOutPerSecond": live.records_out_per_second,
            "numBytesInPerSecond": _byte_rate(live.records_in_per_second, live.bytes_in,
                                              live.records_in),
            "numBytesOutPerSecond": _byte_rate(live.records_out_per_second, live.bytes_out,
                                               live.records_out),
            "currentInputWatermark": float(mark if live.input_watermark is None
                                           else live.input_watermark),
            "currentOutputWatermark": float(mark if live.output_watermark is None
                                            else live.output_watermark),
        })
    return values


def _byte_rate(records_per_second: float, total_bytes: int, total_records: int) -> float:
    """Bytes per second approximated as records per second times the average record size."""
    return records_per_second * total_bytes / total_records if total_records > 0 else 0.0


def execution_metrics(execution: ArchivedExecution, now_ms: int) -> dict[str, float]:
    """The metrics of an archived attempt (live ones while a streaming attempt runs)."""
    return attempt_metrics(execution.metrics, execution.state, execution.state_timestamps, now_ms,
                           execution.live, accumulated_times(execution, now_ms))


def vertex_metrics(vertex: ArchivedJobVertex, now_ms: int) -> dict[str, float]:
    """Flink's vertex metric view: ``"<subtask index>.<metric>"`` -> value, current attempts."""
    values: dict[str, float] = {}
    for sub in sorted(vertex.subtasks, key=lambda s: s.subtask_index):
        for name, value in execution_metrics(sub, now_ms).items():
            values[f"{sub.subtask_index}.{name}"] = value
    return values


def format_metric_value(value: float) -> str:
    """Flink sends metric values as strings: integral values without a decimal point."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def parse_metric_names(get: str | None) -> list[str] | None:
    """``get=a,b`` -> ``["a", "b"]`` (``None`` when absent: list the available metrics).

    Raises:
        ValueError: a name is malformed or there are more than 1000.
    """
    if get is None:
        return None
    names = [n.strip(_BLANK) for n in get.split(",") if n.strip(_BLANK)]
    if len(names) > _MAX_NAMES:
        raise ValueError(f"at most {_MAX_NAMES} metric names per request")
    for name in names:
        if not _NAME.match(name):
            raise ValueError(f"invalid metric name {name!r}")
    return names


def metric_list(available: Mapping[str, float], get: str | None) -> list[dict[str, str]]:
    """Flink's ``MetricCollectionResponseBody``: ``[{"id"}]`` without ``get``, else
    ``[{"id", "value"}]`` for the requested metrics that exist (unknown names are skipped).

    Raises:
        ValueError: from ``parse_metric_names``.
    """
    names = parse_metric_names(get)
    if names is None:
        return [{"id": name} for name in available]
    return [{"id": n, "value": format_metric_value(available[n])} for n in names if n in available]


def parse_aggregations(agg: str | None) -> tuple[str, ...]:
    """``agg=min,max`` -> ``("min", "max")``; absent or empty -> all of ``AGGREGATIONS``.

    Raises:
        ValueError: an unknown aggregation (the message lists the valid ones).
    """
    if agg is None or not agg.strip(_BLANK):
        return AGGREGATIONS
    modes = []
    for raw in agg.split(","):
        mode = raw.strip(_BLANK).lower()
        if mode not in AGGREGATIONS:
            raise ValueError(f"invalid aggregation {raw.strip()!r} (expected one of "
                             f"{', '.join(AGGREGATIONS)})")
        if mode not in modes:
            modes.append(mode)
    return tuple(modes)


def parse_subtask_ranges(text: str | None, parallelism: int) -> list[int]:
    """``"0,2-4"`` -> the selected subtask indices that exist; absent -> all subtasks.

    Raises:
        ValueError: a malformed range.
    """
    if text is None or not text.strip(_BLANK):
        return list(range(parallelism))
    selected: set[int] = set()
    for part in text.split(","):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(f"invalid subtask range {part.strip()!r} (examples: '1', '3-5')")
        low = int(m.group(1))
        high = int(m.group(2)) if m.group(2) is not None else low
        if high < low:
            raise ValueError(f"invalid subtask range {part.strip()!r}: end before start")
        selected.update(range(low, min(high, parallelism - 1) + 1))
    return sorted(selected)


def aggregate(values: Sequence[float], modes: Iterable[str]) -> dict[str, float]:
    """Flink's aggregations of ``values`` (non-empty)."""
    total = float(sum(values))
    avg = total / len(values)
    result: dict[str, float] = {}
    for mode in modes:
        if mode == "min":
            result[mode] = float(min(values))
        elif mode == "max":
            result[mode] = float(max(values))
        elif mode == "sum":
            result[mode] = total
        elif mode == "avg":
            result[mode] = avg
        elif mode == "skew":
            if avg == 0.0:
                result[mode] = 0.0
            else:
                deviation = sum(abs(avg - v) for v in values) / len(values)
                result[mode] = min(deviation / avg * 100.0, 100.0)
    return result
