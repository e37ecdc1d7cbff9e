"""Metric handlers (Flink ``MetricCollectionResponseBody``: a JSON array; values are strings).

``/jobs/:jid/vertices/:vid/metrics`` (``"<subtask>.<metric>"``), ``.../subtasks/metrics``
(aggregated over subtasks: ``get``, ``agg``, ``subtasks``), ``.../subtasks/:i/metrics``,
``/jobs/:jid/metrics`` (``numRestarts``, ``uptime``, ``restartingTime`` and the checkpoint
metrics of ``checkpoint.stats.checkpoint_metric_values``: ``numberOfCompletedCheckpoints``,
``lastCheckpointDuration`` (ms), ``lastCheckpointSize`` (bytes), ...),
``/taskmanagers/:tmid/metrics`` and ``/jobmanager/metrics``. Without ``get`` each lists the
available metric ids. ``/taskmanagers/metrics`` and ``/jobs/metrics`` aggregate over TaskManagers
and jobs (Flink's ``AggregatingTaskManagersMetricsHandler`` / ``AggregatingJobsMetricsHandler``:
``get``, ``agg``, and ``taskmanagers`` / ``jobs`` selecting by id; every one when absent; unknown
ids, and TaskManagers that do not answer, are left out). Names and meanings: ``flintlock.runtime.metrics``. The TaskManager and
JobManager lists include Flink's ``Status.*`` metrics that Flink's dashboard reads
(``Status.JVM.Memory.*``, ``Status.JVM.GarbageCollector.*``, ``Status.JVM.CPU.*``, ...): a
TaskManager's from its embedded Spark JVM or its Python process
(``taskexecutor.process_status``), the JobManager's from its Python process
(``metrics.status``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Query

from flintlock.runtime.checkpoint.stats import checkpoint_metric_values
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.ids import JobID, ResourceID
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
from flintlock.runtime.rest.observability import TM_ID, not_found_errors, parse_task_manager_id
from flintlock.runtime.rest.routing import Ctx, new_router, parse_id

__all__ = ["router"]

log = logging.getLogger(__name__)

router = new_router()

_VERTEX = "/jobs/{jobid}/vertices/{vertexid}"
_GET = Query(description="Comma-separated list of metric ids to return (absent: list the ids).")
Get = Annotated[str | None, _GET]
Agg = Annotated[str | None, Query(description="min,max,sum,avg,skew (default: all).")]
#: at most this many ids in a ``taskmanagers`` / ``jobs`` selection
_MAX_IDS = 1000
_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")


def _bad_query(name: str, exc: ValueError) -> RestHandlerException:
    return RestHandlerException(400, f"Bad request, invalid query parameter {name}: {exc}.")


def _select(available: dict[str, float], get: str | None) -> list[dict[str, str]]:
    try:
        return metric_list(available, get)
    except ValueError as exc:
        raise _bad_query("get", exc) from None


def _aggregated(sources: Sequence[dict[str, float]], available: Sequence[str], get: str | None,
                agg: str | None) -> list[dict[str, Any]]:
    """Flink's ``AggregatedMetricsResponseBody``: ``[{"id", <agg>: value...}]`` for each
    requested metric some source has; without ``get``, ``[{"id"}]`` of ``available``.

    Raises:
        RestHandlerException: 400 for a malformed ``get`` or ``agg``.
    """
    try:
        names = parse_metric_names(get)
    except ValueError as exc:
        raise _bad_query("get", exc) from None
    try:
        modes = parse_aggregations(agg)
    except ValueError as exc:
        raise _bad_query("agg", exc) from None
    if names is None:
        return [{"id": name} for name in available]
    result: list[dict[str, Any]] = []
    for name in names:
        values = [m[name] for m in sources if name in m]
        if values:
            result.append({"id": name, **aggregate(values, modes)})
    return result


def _id_list(name: str, text: str | None) -> list[str] | None:
    """``a,b`` -> ``["a", "b"]`` (None when absent); 400 past ``_MAX_IDS``."""
    if text is None:
        return None
    ids = [i.strip(" \t") for i in text.split(",") if i.strip(" \t")]
    if len(ids) > _MAX_IDS:
        raise RestHandlerException(400, f"Bad request, invalid query parameter {name}: at most "
                                        f"{_MAX_IDS} ids.")
    return ids


def _union(sources: Sequence[dict[str, float]]) -> list[str]:
    return list(dict.fromkeys(name for source in sources for name in source))


@router.get("/jobs/metrics", tags=["metrics"], summary="Job metrics aggregated over jobs.")
async def aggregated_job_metrics(
    ctx: Ctx, get: Get = None, agg: Agg = None,
    jobs: Annotated[str | None, Query(description="Comma-separated job ids (default: all).")]
    = None,
) -> list[dict[str, Any]]:
    selected = _id_list("jobs", jobs)
    if selected is None:
        ids = [d.job_id for d in await ctx.dispatcher.list_jobs()]
    else:
        if not all(_HEX32.match(i) for i in selected):
            raise RestHandlerException(400, "Bad request, invalid query parameter jobs: not a "
                                            "list of job ids (32 hex digits each).")
        ids = [JobID.from_hex(i) for i in selected]
    now = ctx.now_ms()
    sources = []
    for graph in await asyncio.gather(*(ctx.dispatcher.request_job(i) for i in ids),
                                      return_exceptions=True):
        if isinstance(graph, BaseException):
            continue  # unknown to the Dispatcher
        sources.append({**job_metric_values(graph, now),
                        **checkpoint_metric_values(graph.checkpoint_stats)})
    return _aggregated(sources, _union(sources), get, agg)


@router.get("/taskmanagers/metrics", tags=["metrics"],
            summary="TaskManager metrics aggregated over TaskManagers.")
async def aggregated_task_manager_metrics(
    ctx: Ctx, get: Get = None, agg: Agg = None,
    taskmanagers: Annotated[str | None, Query(
        description="Comma-separated TaskManager ids (default: all).")] = None,
) -> list[dict[str, Any]]:
    selected = _id_list("taskmanagers", taskmanagers)
    if selected is None:
        ids = [tm.resource_id for tm in await ctx.dispatcher.request_task_manager_infos()]
    else:
        ids = [ResourceID(i) for i in selected if TM_ID.match(i)]
        if len(ids) < len(selected):
            raise RestHandlerException(400, "Bad request, invalid query parameter taskmanagers: "
                                            "not a list of TaskManager ids (see GET /taskmanagers).")

    async def values(resource_id: ResourceID) -> dict[str, float] | None:
        try:
            return task_manager_metric_values(
                await ctx.task_manager_metrics(resource_id))
        except Exception as exc:  # unknown, gone since the listing, or not answering in time
            log.debug("No metrics of TaskManager %s: %s", resource_id, exc)
            return None

    sources = [v for v in await asyncio.gather(*(values(i) for i in ids)) if v is not None]
    return _aggregated(sources, _union(sources), get, agg)


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
    agg: Agg = None,
    subtasks: Annotated[str | None, Query(description="Subtask ranges, e.g. 0,2-4.")] = None,
) -> list[dict[str, Any]]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    try:
        selected = set(parse_subtask_ranges(subtasks, vertex.parallelism))
    except ValueError as exc:
        raise _bad_query("subtasks", exc) from None
    now = ctx.now_ms()
    per_subtask = [execution_metrics(s, now) for s in vertex.subtasks
                   if s.subtask_index in selected]
    return _aggregated(per_subtask, TASK_METRICS, get, agg)


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
        snapshot = await ctx.task_manager_metrics(resource_id)
    return _select(task_manager_metric_values(snapshot), get)


def _job_manager_process() -> tuple[ProcessStats, dict[str, float]]:
    return process_stats(), python_status_values()


@router.get("/jobmanager/metrics", tags=["metrics"], summary="Metrics of the JobManager.")
async def job_manager_metric_list(ctx: Ctx, get: Get = None) -> list[dict[str, str]]:
    overview = await ctx.dispatcher.request_cluster_overview()
    stats, status = await run_blocking(_job_manager_process)
    return _select({**status, **job_manager_metric_values(overview, stats)}, get)
