"""Flink REST v1 bodies of a job's configuration and of its subtasks (pure functions, no I/O).

``/jobs/:jobid/config`` (``JobConfigInfo``), ``/vertices/:vid/subtasktimes`` (``SubtasksTimesInfo``),
``/vertices/:vid/subtasks/:i[/attempts/:a]`` (``SubtaskExecutionAttemptDetailsInfo``) and
``/vertices/:vid/taskmanagers`` (``JobVertexTaskManagersInfo``). Field names are Flink's wire names
(fact sheet 11.4); timestamps are epoch ms, ``-1`` means "not yet", ``0`` "state never entered".

flintlock additions to the attempt details (Flink clients ignore unknown fields): ``log-file`` and
``log-url`` (the attempt's task log on its TaskManager), ``failure`` (class and message of the
error it failed with) and ``attempts`` (all attempt numbers known for the subtask).

``host``: Flink 2.0 removed the deprecated ``host`` of subtask times, attempt details and
subtask accumulators (FLINK-36355) and sends ``endpoint`` only, but the web dashboard of Flink
2.0/2.1 still reads ``host`` (its subtask timeline shows ``"0 - undefined"``; fixed later by
FLINK-40118, which reads ``endpoint``). flintlock sends both, with the same value, here and in
the vertex TaskManagers, so dashboards before and after that fix show the TaskManager.

``aggregated`` (Flink ``AggregatedTaskDetailsInfo``, ``aggregated_task_details``) summarizes the
subtasks of a vertex, or of one TaskManager: per I/O number and per time spent in CREATED ..
RUNNING, ``min``, ``max``, ``avg``, ``sum``, ``median``, ``p25``, ``p75`` and ``p95`` as Java
longs, computed as Flink computes them (integer mean; percentiles by commons-math's default
``Percentile`` estimation, truncated; all 0 without subtasks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from flintlock.config.sensitive import hidden_items
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    aggregate_vertex_state,
    summed_io,
)
from flintlock.runtime.ids import ExecutionAttemptID, JobID
from flintlock.runtime.jobgraph.types import ExecutionState, JobType
from flintlock.runtime.logs.task_logs import task_log_file_name_of
from flintlock.runtime.metrics.task_metrics import accumulated_times
from flintlock.runtime.taskmanager.task_execution_state import IOMetrics

__all__ = [
    "aggregated_task_details",
    "io_metrics_info",
    "job_config_info",
    "subtask_attempt_details",
    "subtask_times_info",
    "summed_io_info",
    "task_log_url",
    "vertex_task_managers_info",
]

_UNASSIGNED = "(unassigned)"
_STATUS_DURATION_STATES = ("CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING")
#: the I/O numbers ``AggregatedTaskDetailsInfo`` summarizes
_AGGREGATED_METRICS = ("read-bytes", "write-bytes", "read-records", "write-records",
                       "accumulated-backpressured-time", "accumulated-busy-time",
                       "accumulated-idle-time")
_PERCENTILES = (("median", 50.0), ("p25", 25.0), ("p75", 75.0), ("p95", 95.0))


def task_log_url(task_manager: str, job_id: JobID | str, attempt_id: ExecutionAttemptID) -> str:
    """REST path of an attempt's task log: ``/taskmanagers/<tm>/logs/<task log file>``."""
    return (f"/taskmanagers/{quote(task_manager, safe='')}/logs/"
            f"{task_log_file_name_of(job_id, attempt_id)}")


def job_config_info(graph: ArchivedExecutionGraph) -> dict[str, Any]:
    """``GET /jobs/:jobid/config`` (Flink ``JobConfigInfo``); ``user-config`` is the job's
    configuration with sensitive values hidden (``config.sensitive``), ``job-parallelism`` its
    ``parallelism.default`` (else its largest vertex)."""
    conf = hidden_items(graph.configuration)
    try:
        parallelism = int(conf.get("parallelism.default", ""))
    except ValueError:
        parallelism = max((v.parallelism for v in graph.vertices), default=-1)
    return {
        "jid": str(graph.job_id),
        "name": graph.name,
        "execution-config": {
            "execution-mode": "BATCH" if graph.job_type is JobType.BATCH else "PIPELINED",
            "restart-strategy": conf.get("restart-strategy.type",
                                         conf.get("restart-strategy", "none")),
            "job-parallelism": parallelism,
            "object-reuse-mode": False,
            "user-config": dict(sorted(conf.items())),
        },
    }


def io_metrics_info(metrics: IOMetrics, complete: bool,
                    times: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> dict[str, Any]:
    """Flink ``IOMetricsInfo``; ``times``: accumulated (busy, back-pressured, idle) ms
    (``task_metrics.accumulated_times``; Flink sends the last two as longs)."""
    busy_ms, back_pressured_ms, idle_ms = times
    return {
        "read-bytes": metrics.bytes_in,
        "read-bytes-complete": complete,
        "write-bytes": metrics.bytes_out,
        "write-bytes-complete": complete,
        "read-records": metrics.records_in,
        "read-records-complete": complete,
        "write-records": metrics.records_out,
        "write-records-complete": complete,
        "accumulated-backpressured-time": int(back_pressured_ms),
        "accumulated-idle-time": int(idle_ms),
        "accumulated-busy-time": float(busy_ms),
    }


def _times(execution: ArchivedExecution, now_ms: int) -> tuple[int, int, int]:
    """(start, end, duration): start = DEPLOYING, end = terminal timestamp; -1 when not yet."""
    start = int(execution.state_timestamps.get("DEPLOYING", 0)) or -1
    end = execution.end_time() if execution.state.is_terminal() else -1
    if start < 0:
        return -1, end, -1
    return start, end, (end if end >= 0 else now_ms) - start


def _status_durations(execution: ArchivedExecution, now_ms: int) -> dict[str, int]:
    """ms spent in each of CREATED..RUNNING (Flink ``status-duration``)."""
    entered = sorted(((s, int(t)) for s, t in execution.state_timestamps.items()),
                     key=lambda kv: kv[1])
    durations = dict.fromkeys(_STATUS_DURATION_STATES, 0)
    for i, (state, ts) in enumerate(entered):
        if state not in durations:
            continue
        if i + 1 < len(entered):
            durations[state] = entered[i + 1][1] - ts
        elif state == execution.state.name:
            durations[state] = now_ms - ts
    return durations


def _attempt_io(execution: ArchivedExecution, now_ms: int) -> dict[str, Any]:
    return io_metrics_info(execution.metrics, execution.metrics_complete,
                           accumulated_times(execution, now_ms))


def summed_io_info(subtasks: Sequence[ArchivedExecution], now_ms: int) -> dict[str, Any]:
    """The ``IOMetricsInfo`` of several attempts (a vertex's, or its attempts on one
    TaskManager): counts and accumulated times summed, complete when all are (Flink
    ``MutableIOMetrics.addIOMetrics`` over the attempts)."""
    times = [accumulated_times(s, now_ms) for s in subtasks]
    return io_metrics_info(summed_io(subtasks), bool(subtasks) and all(s.metrics_complete for s in subtasks),
                           (sum(t[0] for t in times), sum(t[1] for t in times),
                            sum(t[2] for t in times)))


def subtask_attempt_details(job_id: JobID, execution: ArchivedExecution, now_ms: int,
                            attempts: Iterable[int] = (),
                            others: Sequence[ArchivedExecution] = ()) -> dict[str, Any]:
    """``GET .../subtasks/:i`` and ``.../subtasks/:i/attempts/:a``
    (Flink ``SubtaskExecutionAttemptDetailsInfo``, plus the additions in the module docstring);
    ``others``: the subtask's other current attempts (speculative execution), listed under
    ``other-concurrent-attempts`` as Flink does."""
    start, end, duration = _times(execution, now_ms)
    tm = execution.task_manager
    failure = execution.failure
    return {
        "subtask": execution.subtask_index,
        "status": execution.state.name,
        "attempt": execution.attempt_number,
        "endpoint": tm or _UNASSIGNED,
        "host": tm or _UNASSIGNED,
        "start-time": start,
        "start_time": start,
        "end-time": end,
        "duration": duration,
        "metrics": _attempt_io(execution, now_ms),
        "taskmanager-id": tm or _UNASSIGNED,
        "status-duration": _status_durations(execution, now_ms),
        "other-concurrent-attempts": [subtask_attempt_details(job_id, o, now_ms, attempts)
                                      for o in others],
        "log-file": task_log_file_name_of(job_id, execution.attempt_id),
        "log-url": task_log_url(tm, job_id, execution.attempt_id) if tm else None,
        "failure": ({"class": failure.class_name, "message": failure.message}
                    if failure is not None else None),
        "attempts": sorted(set(attempts) | {execution.attempt_number}),
    }


def subtask_times_info(vertex: ArchivedJobVertex, now_ms: int) -> dict[str, Any]:
    """``GET .../vertices/:vid/subtasktimes`` (Flink ``SubtasksTimesInfo``)."""
    subtasks = []
    for sub in sorted(vertex.subtasks, key=lambda s: s.subtask_index):
        start, _end, duration = _times(sub, now_ms)
        tm = sub.task_manager or _UNASSIGNED
        subtasks.append({
            "subtask": sub.subtask_index,
            "endpoint": tm,
            "host": tm,
            "duration": duration,
            "timestamps": {s.name: int(sub.state_timestamps.get(s.name, 0)) for s in ExecutionState},
            "attempt": sub.attempt_number,
            "taskmanager-id": tm,
        })
    return {"id": str(vertex.id), "name": vertex.name, "now": now_ms, "subtasks": subtasks}


def _java_long(value: float) -> int:
    """Java's ``(long) value``: truncated toward zero, NaN -> 0."""
    return 0 if math.isnan(value) else int(value)


def _percentile(ordered: list[int], percent: float) -> float:
    """commons-math3 ``Percentile`` (default estimation, as Flink uses it) of sorted values."""
    if not ordered:
        return math.nan
    n = len(ordered)
    position = percent / 100.0 * (n + 1)
    if n == 1 or position < 1:
        return float(ordered[0])
    if position >= n:
        return float(ordered[-1])
    low = int(math.floor(position))
    return ordered[low - 1] + (position - low) * (ordered[low] - ordered[low - 1])


def _statistics(values: list[int]) -> dict[str, int]:
    """Flink ``AggregatedTaskDetailsInfo.MetricsStatistics.toMap`` of ``values``."""
    total = sum(values)
    ordered = sorted(values)
    result = {
        "min": ordered[0] if ordered else 0,
        "max": ordered[-1] if ordered else 0,
        # Java's long division truncates toward zero
        "avg": (abs(total) // len(values)) * (1 if total >= 0 else -1) if values else 0,
        "sum": total,
    }
    for name, percent in _PERCENTILES:
        result[name] = _java_long(_percentile(ordered, percent))
    return result


def _aggregated_number(io: Mapping[str, Any], name: str) -> int:
    value = float(io.get(name, 0))
    if name == "accumulated-busy-time" and math.isnan(value):
        return -1  # Flink: an unknown busy time counts as -1
    return _java_long(value)


def aggregated_task_details(ios: Sequence[Mapping[str, Any]],
                            status_durations: Sequence[Mapping[str, int]]) -> dict[str, Any]:
    """Flink ``AggregatedTaskDetailsInfo.create(ioMetricsInfos, statusDurations)``.

    Args:
        ios: the subtasks' ``IOMetricsInfo`` bodies (``io_metrics_info``).
        status_durations: the subtasks' ``status-duration`` maps (state name -> ms).

    Returns:
        ``{"metrics": {<I/O number>: stats}, "status-duration": {<state>: stats}}`` where stats
        is ``{"min", "max", "avg", "sum", "median", "p25", "p75", "p95"}`` (ints: bytes, records
        or ms as the number is; see the module docstring).
    """
    return {
        "metrics": {name: _statistics([_aggregated_number(io, name) for io in ios])
                    for name in _AGGREGATED_METRICS},
        "status-duration": {state: _statistics([int(d.get(state, 0)) for d in status_durations])
                            for state in ("CREATED", "SCHEDULED", "INITIALIZING", "DEPLOYING",
                                          "RUNNING")},
    }


def _task_manager_entry(tm: str, subtasks: list[ArchivedExecution], now_ms: int) -> dict[str, Any]:
    counts = {s.name: 0 for s in ExecutionState}
    for sub in subtasks:
        counts[sub.state.name] += 1
    times = [_times(s, now_ms) for s in subtasks]
    starts = [t[0] for t in times if t[0] >= 0]
    start = min(starts) if starts else -1
    all_terminal = all(s.state.is_terminal() for s in subtasks)
    end = max(t[1] for t in times) if all_terminal and times else -1
    duration = ((end if end >= 0 else now_ms) - start) if start >= 0 else -1
    ios = [_attempt_io(s, now_ms) for s in subtasks]
    durations = [_status_durations(s, now_ms) for s in subtasks]
    return {
        "endpoint": tm,
        "host": tm,
        "taskmanager-id": tm,
        "status": aggregate_vertex_state([s.state for s in subtasks]).name,
        "start-time": start,
        "end-time": end,
        "duration": duration,
        "metrics": summed_io_info(subtasks, now_ms),
        "status-counts": counts,
        "aggregated": aggregated_task_details(ios, durations),
    }


def vertex_task_managers_info(vertex: ArchivedJobVertex, now_ms: int) -> dict[str, Any]:
    """``GET .../vertices/:vid/taskmanagers`` (Flink ``JobVertexTaskManagersInfo``): the current
    attempts grouped by TaskManager (unassigned ones under ``"(unassigned)"``)."""
    by_tm: dict[str, list[ArchivedExecution]] = {}
    for sub in sorted(vertex.subtasks, key=lambda s: s.subtask_index):
        by_tm.setdefault(sub.task_manager or _UNASSIGNED, []).append(sub)
    return {
        "id": str(vertex.id),
        "name": vertex.name,
        "now": now_ms,
        "taskmanagers": [_task_manager_entry(tm, subs, now_ms) for tm, subs in by_tm.items()],
    }
