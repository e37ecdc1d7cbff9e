"""Metric handlers (Flink ``MetricCollectionResponseBody``: a JSON array; values are strings).

``/jobs/:jid/vertices/:vid/metrics`` (``"<subtask>.<metric>"``), ``.../subtasks/metrics``
(aggregated over subtasks: ``get``, ``agg``, ``subtasks``), ``.../subtasks/:i/metrics``,
``/jobs/:jid/metrics`` (``numRestarts``, ``uptime``, ``restartingTime`` and the checkpoint
metrics of ``checkpoint.stats.checkpoint_metric_values``: ``numberOfCompletedCheckpoints``,
``lastCheckpointDuration`` (ms), ``lastCheckpointSize`` (bytes), ...),
``/taskmanagers/:tmid/metrics`` and ``/jobmanager/metrics``. Without ``get`` each lists the
available metric ids. Names and meanings: ``flintlock.runtime.metrics``. The TaskManager and
JobManager lists include Flink's ``Status.*`` metrics that Flink's dashboard reads
(``Status.JVM.Memory.*``, ``Status.JVM.GarbageCollector.*``, ``Status.JVM.CPU.*``, ...): a
TaskManager's from its embedded Spark JVM or its Python process
(``taskexecutor.process_status``), the JobManager's from its Python process
(``metrics.status``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from flintlock.runtime.checkpoint.stats import checkpoint_metric_values
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.ids import JobID
from flintlock.runtime.metrics.job_manager_metrics import (
    job_manager_metric_values,
    job_metric_values,
)
from flintlock.runtime.metrics.process import ProcessStats, process_stats
from flintlock.runtime.metrics.status import python_status_values
from flintlock.runtime.metrics.task_manager_metrics import task_manager_metric_values
from flintlock.runtime.metrics.task_metrics import (
    TASK_METRICS,
    aggregate,
    execution_metrics,
    metric_list,
    parse_aggregations,
    parse_metric_names,
    parse_subtask_ranges,
    vertex_metrics,
)
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.handlers.vertices import find_vertex
from flintlock.runtime.rest.observability import not_found_errors, parse_task_manager_id
from flintlock.runtime.rest.routing import Ctx, new_router, parse_id

__all__ = ["router"]

router = new_router()

_VERTEX = "/jobs/{jobid}/vertices/{vertexid}"
_GET = Query(description="Comma-separated list of metric ids to return (absent: list the ids).")
Get = Annotated[str | None, _GET]


def _bad_query(name: str, exc: ValueError) -> RestHandlerException:
    return RestHandlerException(400, f"Bad request, invalid query parameter {name}: {exc}.")


def _select(available: dict[str, float], get: str | None) -> list[dict[str, str]]:
    try:
        return metric_list(available, get)
    except ValueError as exc:
        raise _bad_query("get", exc) from None


@router.get("/jobs/{jobid}/metrics", tags=["metrics"], summary="Job-scope metrics of a job.")
async def job_metric_list(jobid: str, ctx: Ctx, get: Get = None) -> list[dict[str, str]]:
    graph = await ctx.dispatcher.request_job(parse_id(JobID, "jobid", jobid))
    return _select({**job_metric_values(graph, ctx.now_ms()),
                    **checkpoint_metric_values(graph.checkpoint_stats)}, get)


@router.get(_VERTEX + "/metrics", tags=["metrics"], summary="Task metrics of a job vertex.")
async def vertex_metric_values(jobid: str, vertexid: str, ctx: Ctx, get: Get = None,
                               ) -> list[dict[str, str]]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    return _select(vertex_metrics(vertex, ctx.now_ms()), get)


@router.get(_VERTEX + "/subtasks/metrics", tags=["metrics"],
            summary="Task metrics aggregated over the subtasks of a job vertex.")
async def aggregated_subtask_metrics(
    jobid: str, vertexid: str, ctx: Ctx, get: Get = None,
    agg: Annotated[str | None, Query(description="min,max,sum,avg,skew (default: all).")] = None,
    subtasks: Annotated[str | None, Query(description="Subtask ranges, e.g. 0,2-4.")] = None,
) -> list[dict[str, Any]]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    try:
        names = parse_metric_names(get)
    except ValueError as exc:
        raise _bad_query("get", exc) from None
    if names is None:
        return [{"id": name} for name in TASK_METRICS]
    try:
        modes = parse_aggregations(agg)
    except ValueError as exc:
        raise _bad_query("agg", exc) from None
    try:
        selected = set(parse_subtask_ranges(subtasks, vertex.parallelism))
    except ValueError as exc:
        raise _bad_query("subtasks", exc) from None
    now = ctx.now_ms()
    per_subtask = [execution_metrics(s, now) for s in vertex.subtasks
                   if s.subtask_index in selected]
    result: list[dict[str, Any]] = []
    for name in names:
        values = [m[name] for m in per_subtask if name in m]
        if values:
            result.append({"id": name, **aggregate(values, modes)})
    return result


@router.get(_VERTEX + "/subtasks/{subtaskindex:int}/metrics", tags=["metrics"],
            summary="Task metrics of one subtask (its current attempt).")
async def subtask_metric_values(jobid: str, vertexid: str, subtaskindex: int, ctx: Ctx,
                                get: Get = None) -> list[dict[str, str]]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    for sub in vertex.subtasks:
        if sub.subtask_index == subtaskindex:
            return _select(execution_metrics(sub, ctx.now_ms()), get)
    raise RestHandlerException(
        404, f"Invalid subtask index {subtaskindex} for vertex '{vertex.name}' with parallelism "
             f"{vertex.parallelism}.")


@router.get("/taskmanagers/{taskmanagerid}/metrics", tags=["metrics"],
            summary="Metrics of a TaskManager.")
async def task_manager_metric_list(taskmanagerid: str, ctx: Ctx,
                                   get: Get = None) -> list[dict[str, str]]:
    resource_id = parse_task_manager_id(taskmanagerid)
    with not_found_errors():
        snapshot = await ctx.dispatcher.request_task_manager_metrics(resource_id)
    return _select(task_manager_metric_values(snapshot), get)


def _job_manager_process() -> tuple[ProcessStats, dict[str, float]]:
    return process_stats(), python_status_values()


@router.get("/jobmanager/metrics", tags=["metrics"], summary="Metrics of the JobManager.")
async def job_manager_metric_list(ctx: Ctx, get: Get = None) -> list[dict[str, str]]:
    overview = await ctx.dispatcher.request_cluster_overview()
    stats, status = await run_blocking(_job_manager_process)
    return _select({**status, **job_manager_metric_values(overview, stats)}, get)
