"""Job configuration and subtask handlers: ``/jobs/:jobid/config``, ``/vertices/:vid/subtasktimes``,
``/vertices/:vid/taskmanagers``, ``/vertices/:vid/subtasks/:i[/attempts/:a]`` (Flink shapes; see
``messages_vertices``); the accumulators of a job, vertex, its subtasks and one attempt, a
vertex's flame graph and its JobManager operator metrics (concepts flintlock does not have,
answered with Flink's empty shapes; see ``messages_accumulators``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
)
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.metrics.task_metrics import metric_list
from flintlock.runtime.rest import messages_accumulators, messages_vertices
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router, parse_id

__all__ = ["find_vertex", "router", "subtask_attempts"]

router = new_router()

_VERTEX = "/jobs/{jobid}/vertices/{vertexid}"


async def find_vertex(ctx: RestContext, jobid: str, vertexid: str,
                      ) -> tuple[ArchivedExecutionGraph, ArchivedJobVertex]:
    """The job's snapshot and one of its vertices; 400 for malformed ids, 404 for unknown ones."""
    job_id = parse_id(JobID, "jobid", jobid)
    vertex_id = parse_id(JobVertexID, "vertexid", vertexid)
    graph = await ctx.dispatcher.request_job(job_id)
    for vertex in graph.vertices:
        if vertex.id == vertex_id:
            return graph, vertex
    raise RestHandlerException(404, f"No vertex with ID '{vertex_id}' exists in job {job_id}.")


def subtask_attempts(vertex: ArchivedJobVertex, index: int) -> list[ArchivedExecution]:
    """Every known attempt of subtask ``index`` (current, concurrent and prior); 404 when out of
    range."""
    if not 0 <= index < vertex.parallelism:
        raise RestHandlerException(
            404, f"Invalid subtask index {index} for vertex '{vertex.name}' with parallelism "
                 f"{vertex.parallelism}.")
    return [e for e in (*vertex.subtasks, *vertex.concurrent_attempts, *vertex.prior_attempts)
            if e.subtask_index == index]


def _current(vertex: ArchivedJobVertex, index: int) -> tuple[ArchivedExecution, list[int]]:
    attempts = subtask_attempts(vertex, index)
    for execution in vertex.subtasks:
        if execution.subtask_index == index:
            return execution, [a.attempt_number for a in attempts]
    raise RestHandlerException(404, f"Subtask {index} of vertex '{vertex.name}' has no attempt yet.")


@router.get("/jobs/{jobid}/config", tags=["jobs"], summary="The configuration of a job.")
async def job_config(jobid: str, ctx: Ctx) -> dict[str, Any]:
    graph = await ctx.dispatcher.request_job(parse_id(JobID, "jobid", jobid))
    return messages_vertices.job_config_info(graph)


@router.get(_VERTEX + "/subtasktimes", tags=["jobs"],
            summary="Time-related information for all subtasks of a task.")
async def subtask_times(jobid: str, vertexid: str, ctx: Ctx) -> dict[str, Any]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    return messages_vertices.subtask_times_info(vertex, ctx.now_ms())


@router.get(_VERTEX + "/taskmanagers", tags=["jobs"],
            summary="Task information aggregated by TaskManager.")
async def vertex_task_managers(jobid: str, vertexid: str, ctx: Ctx) -> dict[str, Any]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    return messages_vertices.vertex_task_managers_info(vertex, ctx.now_ms())


@router.get(_VERTEX + "/subtasks/{subtaskindex:int}", tags=["jobs"],
            summary="Details of the current or latest execution attempt of a subtask.")
async def subtask_current_attempt(jobid: str, vertexid: str, subtaskindex: int,
                                  ctx: Ctx) -> dict[str, Any]:
    graph, vertex = await find_vertex(ctx, jobid, vertexid)
    execution, attempts = _current(vertex, subtaskindex)
    others = [c for c in vertex.concurrent_attempts if c.subtask_index == subtaskindex]
    return messages_vertices.subtask_attempt_details(graph.job_id, execution, ctx.now_ms(),
                                                     attempts, others)


def _attempt(vertex: ArchivedJobVertex, index: int, attempt: int) -> ArchivedExecution:
    attempts = subtask_attempts(vertex, index)
    for execution in attempts:
        if execution.attempt_number == attempt:
            return execution
    raise RestHandlerException(
        404, f"Subtask {index} of vertex '{vertex.name}' has no attempt {attempt} "
             f"(known attempts: {sorted(a.attempt_number for a in attempts)}).")


@router.get(_VERTEX + "/subtasks/{subtaskindex:int}/attempts/{attempt:int}", tags=["jobs"],
            summary="Details of one execution attempt of a subtask.")
async def subtask_attempt(jobid: str, vertexid: str, subtaskindex: int, attempt: int,
                          ctx: Ctx) -> dict[str, Any]:
    graph, vertex = await find_vertex(ctx, jobid, vertexid)
    execution = _attempt(vertex, subtaskindex, attempt)
    numbers = [a.attempt_number for a in subtask_attempts(vertex, subtaskindex)]
    return messages_vertices.subtask_attempt_details(graph.job_id, execution, ctx.now_ms(),
                                                     numbers)


# ---- accumulators, flame graphs, JobManager operator metrics (none in flintlock) ------------------


@router.get("/jobs/{jobid}/accumulators", tags=["jobs"],
            summary="The accumulators of a job (flintlock keeps no user accumulators).")
async def job_accumulators(
    jobid: str, ctx: Ctx,
    include_serialized_value: Annotated[bool | None, Query(
        alias="includeSerializedValue",
        description="Whether serialized user task accumulators are included.")] = None,
) -> dict[str, Any]:
    await ctx.dispatcher.request_job(parse_id(JobID, "jobid", jobid))
    return messages_accumulators.job_accumulators_info()


@router.get(_VERTEX + "/accumulators", tags=["jobs"],
            summary="The user accumulators of a task (none in flintlock).")
async def vertex_accumulators(jobid: str, vertexid: str, ctx: Ctx) -> dict[str, Any]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    return messages_accumulators.vertex_accumulators_info(vertex)


@router.get(_VERTEX + "/subtasks/accumulators", tags=["jobs"],
            summary="The user accumulators of every subtask of a task (none in flintlock).")
async def subtasks_accumulators(jobid: str, vertexid: str, ctx: Ctx) -> dict[str, Any]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    return messages_accumulators.subtasks_all_accumulators_info(vertex)


@router.get(_VERTEX + "/subtasks/{subtaskindex:int}/attempts/{attempt:int}/accumulators",
            tags=["jobs"],
            summary="The user accumulators of one execution attempt (none in flintlock).")
async def subtask_attempt_accumulators(jobid: str, vertexid: str, subtaskindex: int,
                                       attempt: int, ctx: Ctx) -> dict[str, Any]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    return messages_accumulators.subtask_attempt_accumulators_info(
        _attempt(vertex, subtaskindex, attempt))


@router.get(_VERTEX + "/flamegraph", tags=["jobs"],
            summary="The flame graph of a task: always Flink's answer when flame graphs are "
                    "disabled, {'endTimestamp': -2} (flintlock samples no stacks).")
async def vertex_flame_graph(
    jobid: str, vertexid: str,
    graph_type: Annotated[str | None, Query(
        alias="type", description="FULL, ON_CPU or OFF_CPU (any case; default FULL).")] = None,
    subtaskindex: Annotated[int | None, Query(
        ge=0, description="One subtask's flame graph instead of the vertex's.")] = None,
) -> dict[str, Any]:
    # like Flink's DisabledJobVertexFlameGraphHandler: parameters are parsed, nothing looked up
    parse_id(JobID, "jobid", jobid)
    parse_id(JobVertexID, "vertexid", vertexid)
    types = messages_accumulators.FLAME_GRAPH_TYPES
    if graph_type is not None and graph_type.strip(" \t").upper() not in types:
        raise RestHandlerException(
            400, f"Bad request, invalid query parameter type: {graph_type!r} (expected one of "
                 f"{', '.join(types)}).")
    return messages_accumulators.vertex_flame_graph_disabled()


@router.get(_VERTEX + "/jm-operator-metrics", tags=["metrics"],
            summary="Metrics of the task's operator coordinator on the JobManager (none in "
                    "flintlock: an empty list).")
async def job_manager_operator_metrics(
    jobid: str, vertexid: str,
    get: Annotated[str | None, Query(
        description="Comma-separated list of metric ids to return (absent: list the ids).")
    ] = None,
) -> list[dict[str, str]]:
    # like Flink's JobManagerOperatorMetricsHandler without a metric store entry: []
    parse_id(JobID, "jobid", jobid)
    parse_id(JobVertexID, "vertexid", vertexid)
    try:
        return metric_list({}, get)
    except ValueError as exc:
        raise RestHandlerException(
            400, f"Bad request, invalid query parameter get: {exc}.") from None
