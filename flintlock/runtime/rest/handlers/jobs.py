"""Job handlers: lists, details, status, plan, exceptions, result, vertices, cancellation."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from flintlock.config.options import WEB_EXCEPTION_HISTORY_SIZE
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.rest import messages
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router, parse_id

__all__ = ["router"]

router = new_router()

_JOBID_DOC = "32-character hexadecimal string value that identifies a job."


@router.get("/jobs", tags=["jobs"], summary="Ids and statuses of all jobs.")
async def list_jobs(ctx: Ctx) -> dict[str, Any]:
    return messages.job_ids_with_status(await ctx.dispatcher.list_jobs())


@router.get("/jobs/overview", tags=["jobs"], summary="Overview of all jobs.")
async def jobs_overview(ctx: Ctx) -> dict[str, Any]:
    return messages.multiple_jobs_details(await ctx.dispatcher.list_jobs())


@router.get("/jobs/{jobid}", tags=["jobs"], summary="Details of a job.",
            description=_JOBID_DOC)
async def job_details(jobid: str, ctx: Ctx) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    graph = await ctx.dispatcher.request_job(job_id)
    return messages.job_details_info(graph, ctx.now_ms())


@router.get("/jobs/{jobid}/status", tags=["jobs"], summary="The status of a job.")
async def job_status(jobid: str, ctx: Ctx) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    status = await ctx.dispatcher.request_job_status(job_id)
    return {"status": status.name}


@router.get("/jobs/{jobid}/plan", tags=["jobs"], summary="The dataflow plan of a job.")
async def job_plan(jobid: str, ctx: Ctx) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    graph = await ctx.dispatcher.request_job(job_id)
    return messages.job_plan(graph)


@router.get("/jobs/{jobid}/exceptions", tags=["jobs"],
            summary="The most recent exceptions of a job (newest first).",
            description="Root entries (one per failover) with their concurrent failures; at "
                        "most web.exception-history-size of them are kept.")
async def job_exceptions(
    jobid: str,
    ctx: Ctx,
    max_exceptions: Annotated[int, Query(alias="maxExceptions", ge=0,
                                         description="Upper limit of exceptions to return.")
                              ] = messages.DEFAULT_MAX_EXCEPTIONS,
) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    graph = await ctx.dispatcher.request_job(job_id)
    return messages.job_exceptions(graph, max_exceptions, _exception_history_size(ctx, graph))


def _exception_history_size(ctx: RestContext, graph: ArchivedExecutionGraph) -> int:
    """``web.exception-history-size`` of the job's configuration, else of the cluster's."""
    configured = graph.configuration.get(WEB_EXCEPTION_HISTORY_SIZE.key)
    if configured is not None:
        try:
            return int(WEB_EXCEPTION_HISTORY_SIZE.parse(configured))
        except ValueError:
            pass  # validated at submission; a bad value falls back to the cluster's
    return int(ctx.configuration.get(WEB_EXCEPTION_HISTORY_SIZE))


#: the longest ``wait-ms`` of ``GET /jobs/:jobid/execution-result`` (ms), well below the
#: clients' request timeout (``client.timeout``, 60 s)
MAX_RESULT_WAIT_MS = 30_000
#: how much longer than ``wait-ms`` the Dispatcher call may take (s)
_RPC_MARGIN_S = 10.0


@router.get("/jobs/{jobid}/execution-result", tags=["jobs"],
            summary="The result of a job execution (IN_PROGRESS until it is globally terminal).")
async def job_execution_result(
    jobid: str, ctx: Ctx,
    wait_ms: Annotated[int, Query(
        alias="wait-ms", ge=0, le=MAX_RESULT_WAIT_MS,
        description="flintlock extension (a blocking query): answer as soon as the result is "
                    "there, or IN_PROGRESS after this many ms; 0 (default) answers at once, as "
                    "Flink does.")] = 0,
) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    if wait_ms:  # the RPC's own timeout must outlast the wait
        result = await ctx.dispatcher.request_job_result(
            job_id, wait_ms / 1000.0, timeout=wait_ms / 1000.0 + _RPC_MARGIN_S)
    else:
        result = await ctx.dispatcher.request_job_result(job_id)
    return messages.execution_result(result)


@router.get("/jobs/{jobid}/vertices/{vertexid}", tags=["jobs"],
            summary="Details of a task (vertex) with its subtasks.")
async def job_vertex(jobid: str, vertexid: str, ctx: Ctx) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    vertex_id = parse_id(JobVertexID, "vertexid", vertexid)
    graph = await ctx.dispatcher.request_job(job_id)
    for vertex in graph.vertices:
        if vertex.id == vertex_id:
            return messages.job_vertex_details(job_id, vertex, ctx.now_ms())
    raise RestHandlerException(404, f"No vertex with ID '{vertex_id}' exists in job {job_id}.")


async def _cancel(ctx: RestContext, jobid: str) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    await ctx.dispatcher.cancel_job(job_id)
    return {}


@router.patch("/jobs/{jobid}", status_code=202, tags=["jobs"], summary="Terminates a job.")
async def terminate_job(
    jobid: str,
    ctx: Ctx,
    mode: Annotated[str | None, Query(description='"cancel" (default); "stop" unsupported.')
                    ] = None,
) -> dict[str, Any]:
    chosen = (mode or "cancel").lower()
    if chosen == "stop":
        raise RestHandlerException(
            400, "Termination mode 'stop' is not supported; use mode=cancel, or POST "
                 "/jobs/:jobid/stop to stop a job with a savepoint.")
    if chosen != "cancel":
        raise RestHandlerException(
            400, f"Bad request, invalid query parameter mode: {mode!r} (expected 'cancel').")
    return await _cancel(ctx, jobid)


@router.get("/jobs/{jobid}/yarn-cancel", status_code=202, tags=["jobs"],
            summary="Cancels a job (legacy GET form the web UI uses).")
async def yarn_cancel_job(jobid: str, ctx: Ctx) -> dict[str, Any]:
    return await _cancel(ctx, jobid)
