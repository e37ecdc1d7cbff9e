"""Job configuration and subtask handlers: ``/jobs/:jobid/config``, ``/vertices/:vid/subtasktimes``,
``/vertices/:vid/taskmanagers``, ``/vertices/:vid/subtasks/:i[/attempts/:a]`` (Flink shapes; see
``messages_vertices``)."""

from __future__ import annotations

from typing import Any

from flintlock.runtime.executiongraph.archived import (
    ArchivedExecution,
    ArchivedExecutionGraph,
    ArchivedJobVertex,
)
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.rest import messages_vertices
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
    """Every known attempt of subtask ``index`` (current and prior); 404 when out of range."""
    if not 0 <= index < vertex.parallelism:
        raise RestHandlerException(
            404, f"Invalid subtask index {index} for vertex '{vertex.name}' with parallelism "
                 f"{vertex.parallelism}.")
    return [e for e in (*vertex.subtasks, *vertex.prior_attempts) if e.subtask_index == index]


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
    return messages_vertices.subtask_attempt_details(graph.job_id, execution, ctx.now_ms(),
                                                     attempts)


@router.get(_VERTEX + "/subtasks/{subtaskindex:int}/attempts/{attempt:int}", tags=["jobs"],
            summary="Details of one execution attempt of a subtask.")
async def subtask_attempt(jobid: str, vertexid: str, subtaskindex: int, attempt: int,
                          ctx: Ctx) -> dict[str, Any]:
    graph, vertex = await find_vertex(ctx, jobid, vertexid)
    attempts = subtask_attempts(vertex, subtaskindex)
    numbers = [a.attempt_number for a in attempts]
    for execution in attempts:
        if execution.attempt_number == attempt:
            return messages_vertices.subtask_attempt_details(graph.job_id, execution,
                                                             ctx.now_ms(), numbers)
    raise RestHandlerException(
        404, f"Subtask {subtaskindex} of vertex '{vertex.name}' has no attempt {attempt} "
             f"(known attempts: {sorted(numbers)}).")
