"""Flink REST v1 response bodies built from the runtime's snapshots (pure functions, no I/O).

Field names are Flink's exactly (hyphenated where Flink's Java classes serialize them so); see
fact sheet section 11.4 and ``flink-rest-v1.yml``. Timestamps are epoch milliseconds; Flink's "not
yet" values are kept (``-1`` for an end time of a running job, ``0`` for a state never entered).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import WEB_EXCEPTION_HISTORY_SIZE, WEB_REFRESH, WEB_SUBMIT
from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
    JobDetails,
    JobResult,
    RootExceptionHistoryEntry,
)
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.json_plan import plan_description
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.rest.messages_vertices import (
    aggregated_task_details,
    subtask_attempt_details,
    summed_io_info,
    task_log_url,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = [
    "DEFAULT_EXCEPTION_HISTORY_SIZE",
    "DEFAULT_MAX_EXCEPTIONS",
    "cluster_overview",
    "dashboard_configuration",
    "execution_result",
    "job_details_info",
    "job_exceptions",
    "job_details_row",
    "job_ids_with_status",
    "job_plan",
    "job_plan_body",
    "job_vertex_details",
    "multiple_jobs_details",
]

#: Flink's ``JobExceptionsHandler.MAX_NUMBER_EXCEPTION_TO_REPORT``.
DEFAULT_MAX_EXCEPTIONS = 20
#: ``web.exception-history-size``'s default.
DEFAULT_EXCEPTION_HISTORY_SIZE = int(WEB_EXCEPTION_HISTORY_SIZE.default or 16)

_UNASSIGNED = "(unassigned)"


# ---- cluster ---------------------------------------------------------------------------------------


def _timezone() -> tuple[str, int]:
    """(IANA name when known, else the abbreviation; current UTC offset in ms)."""
    now = datetime.datetime.now().astimezone()
    offset = now.utcoffset() or datetime.timedelta(0)
    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        try:
            target = os.path.realpath("/etc/localtime")
            name = target.split("zoneinfo/", 1)[1] if "zoneinfo/" in target else ""
        except OSError:
            name = ""
    return name or (now.tzname() or "UTC"), int(offset.total_seconds() * 1000)


def dashboard_configuration(configuration: Configuration, flink_version: str,
                            flink_revision: str) -> dict[str, Any]:
    """``GET /config`` (Flink ``DashboardConfiguration``)."""
    tz_name, tz_offset = _timezone()
    return {
        "refresh-interval": int(configuration.get(WEB_REFRESH) * 1000),
        "timezone-name": tz_name,
        "timezone-offset": tz_offset,
        "flink-version": flink_version,
        "flink-revision": flink_revision,
        "features": {
            "web-submit": bool(configuration.get(WEB_SUBMIT)),
            "web-cancel": True,
            "web-rescale": False,
            "web-history": False,
        },
    }


def cluster_overview(overview: ClusterOverview, flink_version: str,
                     flink_commit: str) -> dict[str, Any]:
    """``GET /overview`` (Flink ``ClusterOverviewWithVersion``)."""
    r = overview.resources
    body: dict[str, Any] = {
        "taskmanagers": r.number_of_task_managers,
        "slots-total": r.number_of_slots,
        "slots-available": r.number_of_free_slots,
        # flintlock's: started by an active ResourceManager, not registered yet
        "taskmanagers-pending": r.number_of_pending_task_managers,
        "jobs-running": overview.jobs_running,
        "jobs-finished": overview.jobs_finished,
        "jobs-cancelled": overview.jobs_cancelled,
        "jobs-failed": overview.jobs_failed,
        "flink-version": flink_version,
        "flink-commit": flink_commit,
    }
    # Flink sends these only when not zero (slow nodes blocked by speculative execution)
    if r.number_of_blocked_task_managers:
        body["taskmanagers-blocked"] = r.number_of_blocked_task_managers
    if r.number_of_free_and_blocked_slots:
        body["slots-free-and-blocked"] = r.number_of_free_and_blocked_slots
    return body


# ---- job lists -------------------------------------------------------------------------------------


def job_ids_with_status(jobs: Iterable[JobDetails]) -> dict[str, Any]:
    """``GET /jobs`` (Flink ``JobIdsWithStatusOverview``)."""
    return {"jobs": [{"id": str(j.job_id), "status": j.state.name} for j in jobs]}


def _task_counts_lower(tasks: Mapping[str, int]) -> dict[str, int]:
    counts = {s.name.lower(): int(tasks.get(s.name, 0)) for s in ExecutionState}
    return {"total": sum(counts.values()), **counts}


def job_details_row(job: JobDetails) -> dict[str, Any]:
    """One row of ``GET /jobs/overview`` (Flink ``JobDetails``)."""
    return {
        "jid": str(job.job_id),
        "name": job.name,
        "start-time": job.start_time,
        "end-time": job.end_time,
        "duration": job.duration,
        "state": job.state.name,
        "last-modification": job.last_modification,
        "tasks": _task_counts_lower(job.tasks),
        "pending-operators": 0,
    }


def multiple_jobs_details(jobs: Iterable[JobDetails]) -> dict[str, Any]:
    """``GET /jobs/overview`` (Flink ``MultipleJobsDetails``)."""
    return {"jobs": [job_details_row(j) for j in jobs]}


# ---- one job ---------------------------------------------------------------------------------------


def _slot_sharing_group_id(name: str) -> str:
    """A stable 32-hex id for a slot sharing group name (Flink prints an AbstractID)."""
    return hashlib.md5(name.encode("utf-8"), usedforsecurity=False).hexdigest()


def _vertex_times(vertex: ArchivedJobVertex, now_ms: int) -> tuple[int, int, int]:
    """(start, end, duration) as Flink's ``JobDetailsHandler.createJobVertexDetailsInfo``."""
    start = None
    end = 0
    all_terminal = True
    for sub in vertex.subtasks:
        deployed = sub.state_timestamps.get("DEPLOYING", 0)
        if deployed > 0:
            start = deployed if start is None else min(start, deployed)
        all_terminal = all_terminal and sub.state.is_terminal()
        end = max(end, sub.state_timestamps.get(sub.state.name, 0))
    if start is None:
        return -1, -1, -1
    if all_terminal:
        return start, end, end - start
    return start, -1, now_ms - start


def _vertex_info(vertex: ArchivedJobVertex, now_ms: int) -> dict[str, Any]:
    start, end, duration = _vertex_times(vertex, now_ms)
    return {
        "id": str(vertex.id),
        "slotSharingGroupId": _slot_sharing_group_id(vertex.slot_sharing_group),
        "name": vertex.name,
        "maxParallelism": vertex.max_parallelism,
        "parallelism": vertex.parallelism,
        "status": vertex.state.name,
        "start-time": start,
        "end-time": end,
        "duration": duration,
        "tasks": vertex.task_counts(),
        "metrics": summed_io_info(vertex.subtasks, now_ms),
    }


def _job_max_parallelism(graph: ArchivedExecutionGraph) -> int:
    try:
        return int(graph.configuration.get("pipeline.max-parallelism", -1))
    except (TypeError, ValueError):
        return -1


def job_plan_body(graph: ArchivedExecutionGraph) -> dict[str, Any]:
    """Flink's plan JSON: the JobGraph's own plan, or one node per vertex when it has none."""
    if graph.plan:
        return dict(graph.plan)
    return {
        "jid": str(graph.job_id),
        "name": graph.name,
        "type": graph.job_type.name,
        "nodes": [
            {
                "id": str(v.id),
                "parallelism": v.parallelism,
                "operator": "",
                "operator_strategy": "",
                "description": plan_description(v.name),
                "optimizer_properties": {},
            }
            for v in graph.vertices
        ],
    }


def job_plan(graph: ArchivedExecutionGraph) -> dict[str, Any]:
    """``GET /jobs/:jobid/plan`` (Flink ``JobPlanInfo``)."""
    return {"plan": job_plan_body(graph)}


def job_details_info(graph: ArchivedExecutionGraph, now_ms: int) -> dict[str, Any]:
    """``GET /jobs/:jobid`` (Flink ``JobDetailsInfo``)."""
    start = graph.start_time()
    end = graph.end_time()
    status_counts = {s.name: 0 for s in ExecutionState}
    for v in graph.vertices:
        if v.chained_into is not None:  # its subtasks are those of the vertex it runs in
            continue
        for name, n in v.task_counts().items():
            status_counts[name] += n
    return {
        "jid": str(graph.job_id),
        "name": graph.name,
        "isStoppable": False,
        "state": graph.state.name,
        "job-type": graph.job_type.name,
        "start-time": start,
        "end-time": end,
        "duration": ((end if end >= 0 else now_ms) - start) if start >= 0 else -1,
        "maxParallelism": _job_max_parallelism(graph),
        "now": now_ms,
        "timestamps": {s.name: int(graph.state_timestamps.get(s.name, 0)) for s in JobStatus},
        "vertices": [_vertex_info(v, now_ms) for v in graph.vertices],
        "status-counts": status_counts,
        "plan": job_plan_body(graph),
        "pending-operators": 0,
        # flintlock additions (Flink clients ignore unknown fields):
        # slot requests the job is waiting for (a job short of slots waits)
        "pending-slot-requests": graph.pending_slot_requests,
        # restarts so far (Flink's numRestarts job metric)
        "numRestarts": graph.number_of_restarts,
        # how many new JobManager leaders recovered the job (high availability)
        "recoveries": graph.recoveries,
        # epoch ms at which the pending restart may begin; -1 unless the job is RESTARTING
        "next-restart-time": (
            graph.next_restart_attempt_ms if graph.next_restart_attempt_ms is not None else -1
        ),
    }


def _stack_trace(error: SerializedError) -> str:
    return error.traceback or error.short()


def _task_manager_of(graph: ArchivedExecutionGraph, entry: ExceptionHistoryEntry) -> str | None:
    if entry.attempt_id is not None:
        for v in graph.vertices:
            for execution in (*v.subtasks, *v.prior_attempts):
                if execution.attempt_id == entry.attempt_id:
                    return execution.task_manager
    return entry.location


def _exception_info(graph: ArchivedExecutionGraph, entry: ExceptionHistoryEntry) -> dict[str, Any]:
    """Flink ``ExceptionInfo`` (one failure).

    flintlock additions (Flink clients ignore unknown fields), set for task failures: ``vertexId``,
    ``subtaskIndex``, ``attemptNumber`` of the failed attempt and ``logUrl``, the REST path of its
    task log on its TaskManager (None for job-level failures or unassigned attempts).
    """
    tm = _task_manager_of(graph, entry)
    attempt = entry.attempt_id
    return {
        "exceptionName": entry.error.class_name,
        "stacktrace": _stack_trace(entry.error),
        "timestamp": entry.timestamp_ms,
        "taskName": entry.task_name,
        "endpoint": entry.location,
        "taskManagerId": tm,
        "failureLabels": {},
        "vertexId": str(attempt.job_vertex_id) if attempt is not None else None,
        "subtaskIndex": attempt.subtask_index if attempt is not None else None,
        "attemptNumber": attempt.attempt_number if attempt is not None else None,
        "logUrl": (task_log_url(tm, graph.job_id, attempt)
                   if attempt is not None and tm else None),
    }


def _root_exception_info(graph: ArchivedExecutionGraph,
                         root: RootExceptionHistoryEntry) -> dict[str, Any]:
    """Flink ``RootExceptionInfo``: the failure that started a failover, and those that joined."""
    return {
        **_exception_info(graph, root.root),
        "concurrentExceptions": [_exception_info(graph, e) for e in root.concurrent],
    }


def _subtask_name(vertex: ArchivedJobVertex, execution: ArchivedExecution) -> str:
    return f"{vertex.name} ({execution.subtask_index + 1}/{vertex.parallelism})"


def job_exceptions(graph: ArchivedExecutionGraph, max_exceptions: int,
                   history_size: int = DEFAULT_EXCEPTION_HISTORY_SIZE) -> dict[str, Any]:
    """``GET /jobs/:jobid/exceptions`` (Flink ``JobExceptionsInfoWithHistory``).

    ``exceptionHistory.entries`` are root entries, newest first: each failure that started a
    failover, with the failures recorded while that restart was pending (e.g. the other tasks of a
    lost TaskManager) in its ``concurrentExceptions``. At most ``history_size`` root entries are
    kept (``web.exception-history-size``) and ``max_exceptions`` shown; ``truncated`` is true
    when older root entries are left out for either reason. The pre-1.13 fields
    (``root-exception``, ``timestamp``, ``all-exceptions``, ``truncated``) are filled as Flink 1.x
    did: the latest failure cause (the job's root cause once it failed) and the failures of the
    current attempts.
    """
    roots = graph.root_exception_history()
    shown = list(reversed(roots[-history_size:]))[:max_exceptions]
    failed_tasks: list[dict[str, Any]] = []
    for v in graph.vertices:
        if v.chained_into is not None:  # listed under the vertex it runs in
            continue
        for sub in v.subtasks:
            if sub.state is ExecutionState.FAILED and sub.failure is not None:
                tm = sub.task_manager or _UNASSIGNED
                failed_tasks.append({
                    "exception": _stack_trace(sub.failure),
                    "task": _subtask_name(v, sub),
                    "location": tm,
                    "timestamp": int(sub.state_timestamps.get("FAILED", 0)),
                    "taskManagerId": tm,
                })
    root = graph.failure or (roots[-1].root if roots else None)
    return {
        "root-exception": _stack_trace(root.error) if root is not None else None,
        "timestamp": root.timestamp_ms if root is not None else None,
        "all-exceptions": failed_tasks[:max_exceptions],
        "truncated": len(failed_tasks) > max_exceptions,
        "exceptionHistory": {
            "entries": [_root_exception_info(graph, r) for r in shown],
            "truncated": len(roots) > len(shown),
        },
    }


def execution_result(result: JobResult | None) -> dict[str, Any]:
    """``GET /jobs/:jobid/execution-result`` (Flink ``JobExecutionResultResponseBody``)."""
    if result is None:
        return {"status": {"id": "IN_PROGRESS"}}
    body: dict[str, Any] = {
        "id": str(result.job_id),
        "application-status": result.application_status,
        "accumulator-results": {
            name: base64.b64encode(value).decode("ascii")
            for name, value in result.accumulator_results.items()
        },
        "net-runtime": result.net_runtime_ms,
    }
    if result.failure is not None:
        body["failure-cause"] = {
            "class": result.failure.error.class_name,
            "stack-trace": _stack_trace(result.failure.error),
            "serialized-throwable": "",
            # flintlock additions (Flink clients ignore unknown fields): what the CLI shows
            "message": result.failure.error.message,
            "task-name": result.failure.task_name,
            "location": result.failure.location,
            "timestamp": result.failure.timestamp_ms,
        }
    return {"status": {"id": "COMPLETED"}, "job-execution-result": body}


def job_vertex_details(job_id: JobID, vertex: ArchivedJobVertex, now_ms: int) -> dict[str, Any]:
    """``GET /jobs/:jobid/vertices/:vertexid`` (Flink ``JobVertexDetailsInfo``).

    Each subtask entry is the current attempt's ``SubtaskExecutionAttemptDetailsInfo`` (with the
    ``log-file`` / ``log-url`` additions of :mod:`messages_vertices`); ``aggregated`` summarizes
    them (``AggregatedTaskDetailsInfo``, as Flink's ``JobVertexDetailsHandler`` builds it).
    """
    subtasks = [
        subtask_attempt_details(job_id, s, now_ms, _attempt_numbers(vertex, s.subtask_index),
                                [c for c in vertex.concurrent_attempts
                                 if c.subtask_index == s.subtask_index])
        for s in sorted(vertex.subtasks, key=lambda s: s.subtask_index)
    ]
    return {
        "id": str(vertex.id),
        "name": vertex.name,
        "maxParallelism": vertex.max_parallelism,
        "parallelism": vertex.parallelism,
        "now": now_ms,
        "subtasks": subtasks,
        "aggregated": aggregated_task_details([s["metrics"] for s in subtasks],
                                              [s["status-duration"] for s in subtasks]),
    }


def _attempt_numbers(vertex: ArchivedJobVertex, subtask_index: int) -> list[int]:
    return [e.attempt_number for e in (*vertex.prior_attempts, *vertex.concurrent_attempts)
            if e.subtask_index == subtask_index]
