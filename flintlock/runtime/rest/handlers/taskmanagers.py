"""TaskManager handlers: ``/taskmanagers[/:id]``, ``/taskmanagers/:id/logs[/:filename]``,
``/taskmanagers/:id/log``, ``/taskmanagers/:id/stdout``, ``/taskmanagers/:id/thread-dump``,
``/taskmanagers/:id/profiler`` (GET, POST) and ``/jobs/:jobid/taskmanagers/:id/log-url``.
``/taskmanagers`` also lists (``pendingTaskManagers``) the TaskManagers an active ResourceManager
is starting or stopping, and why it holds more back (``heldBack``; ``messages_cluster``).

Logs and thread dumps are read from the TaskManager over RPC (REST -> Dispatcher ->
ResourceManager -> TaskExecutor, Flink's ``requestTaskManagerLogList`` /
``requestTaskManagerFileUploadByName`` / ``requestThreadDump``); logs in chunks of at most 1 MiB
(paging and headers: ``log_responses``). A thread dump is Flink's ``ThreadDumpInfo`` of the
TaskManager's Python process (``flintlock.runtime.thread_dump``, frames per thread:
``cluster.thread-dump.stacktrace-max-depth``). ``/taskmanagers/:id`` adds the TaskManager's
metrics (its ``Status.*`` values, fetched from it; zeros when it does not answer) to its info
(bodies: ``messages_cluster``). Profiling: ``rest.profiling``. ``/taskmanagers`` entries carry a
flintlock ``spark`` object (the TaskManager's Spark session: master, version, ...) when the
TaskManager reported one.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.responses import Response

from flintlock.config.options import THREAD_DUMP_MAX_DEPTH
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.logs.exceptions import LogFileNotFoundException
from flintlock.runtime.logs.files import LogChunk, check_log_file_name
from flintlock.runtime.resourcemanager.gateway import TaskManagerInfo
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.log_responses import LogReader, log_file_response
from flintlock.runtime.rest.messages_cluster import (
    pending_task_manager_info,
    task_manager_details,
    task_manager_info,
    thread_dump_info,
)
from flintlock.runtime.rest.observability import not_found_errors, parse_task_manager_id
from flintlock.runtime.rest.openapi import LOG_FILE, SECURED
from flintlock.runtime.rest.profiling import Profiling, ProfilingRequest
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router, parse_id
from flintlock.runtime.rest.security import authenticate

__all__ = ["LogRange", "dashboard_url", "log_file_name", "router"]

log = logging.getLogger(__name__)

router = new_router()

_TM = "/taskmanagers/{taskmanagerid}"


class LogRange:
    """The paging query parameters of a log file request (``log_responses``)."""

    def __init__(
        self,
        start: Annotated[int | None, Query(description="First byte (negative: from the end).")
                         ] = None,
        count: Annotated[int | None, Query(description="Bytes to return (at most 1 MiB).")
                         ] = None,
        offset: Annotated[int | None, Query(description="Alias of start.")] = None,
        length: Annotated[int | None, Query(description="Alias of count.")] = None,
        download: Annotated[bool, Query(description="Serve as an attachment.")] = False,
    ) -> None:
        self.start = start if start is not None else offset
        self.count = count if count is not None else length
        self.download = download


def log_file_name(filename: str) -> str:
    """A ``:filename`` path parameter; 400 when it is not a plain log file name."""
    try:
        return check_log_file_name(filename)
    except LogFileNotFoundException as exc:
        raise RestHandlerException(400, f"Bad request, invalid path parameter filename: {exc}"
                                   ) from None


def dashboard_url(request: Request) -> str:
    """The address this REST server (and its web dashboard) is reached at, without a trailing
    ``/`` (what Flink's ``GeneratedLogUrlHandler`` builds log urls from)."""
    return str(request.base_url).rstrip("/")


def _with_spark(body: dict[str, Any], tm: TaskManagerInfo) -> dict[str, Any]:
    """Add ``spark`` when the TaskManager described its session (omitted when empty, as Flink
    omits its non-default fields)."""
    if tm.spark:
        body["spark"] = dict(tm.spark)
    return body


async def _task_manager(ctx: RestContext, taskmanagerid: str) -> TaskManagerInfo:
    resource_id = parse_task_manager_id(taskmanagerid)
    for tm in await ctx.dispatcher.request_task_manager_infos():
        if tm.resource_id == resource_id:
            return tm
    raise RestHandlerException(404, f"Could not find TaskManager {taskmanagerid}.")


@router.get("/taskmanagers", tags=["taskmanagers"],
            summary="Overview of all TaskManagers, and those an active ResourceManager is "
                    "starting or stopping.")
async def task_managers(ctx: Ctx) -> dict[str, Any]:
    infos = await ctx.dispatcher.request_task_manager_infos()
    resources = (await ctx.dispatcher.request_cluster_overview()).resources
    body: dict[str, Any] = {
        "taskmanagers": [_with_spark(task_manager_info(tm), tm) for tm in infos],
        "pendingTaskManagers": [pending_task_manager_info(p)
                                for p in resources.pending_task_managers]}
    if resources.held_back:
        body["heldBack"] = resources.held_back
    return body


async def _status(ctx: RestContext, tm: TaskManagerInfo) -> dict[str, float]:
    """The TaskManager's ``Status.*`` metrics; empty when it cannot answer now (as Flink's
    details show 0 for metrics its metric store has not fetched)."""
    try:
        snapshot = await ctx.task_manager_metrics(tm.resource_id)
    except Exception as exc:  # gone since the listing, or not answering in time
        log.debug("No metrics of TaskManager %s: %s", tm.resource_id, exc)
        return {}
    return dict(getattr(snapshot, "status", None) or {})


@router.get(_TM, tags=["taskmanagers"], summary="Details of one TaskManager.")
async def task_manager(taskmanagerid: str, ctx: Ctx) -> dict[str, Any]:
    tm = await _task_manager(ctx, taskmanagerid)
    return _with_spark(task_manager_details(tm, await _status(ctx, tm)), tm)


@router.get(_TM + "/thread-dump", tags=["taskmanagers"],
            summary="The threads of a TaskManager process with their stacks.")
async def task_manager_thread_dump(taskmanagerid: str, ctx: Ctx) -> dict[str, Any]:
    resource_id = parse_task_manager_id(taskmanagerid)
    with not_found_errors():
        threads = await ctx.dispatcher.request_task_manager_thread_dump(
            resource_id, ctx.configuration.get(THREAD_DUMP_MAX_DEPTH))
    return thread_dump_info(threads)


@router.get(_TM + "/profiler", tags=["taskmanagers"],
            summary="Profiling runs of a TaskManager (none can succeed: see rest.profiling).")
async def task_manager_profiling_list(taskmanagerid: str, ctx: Ctx,
                                      history: Profiling) -> dict[str, Any]:
    tm = await _task_manager(ctx, taskmanagerid)
    return {"profilingList": history.runs(str(tm.resource_id))}


@router.post(_TM + "/profiler", tags=["taskmanagers"], openapi_extra=SECURED,
             summary="Asks for a profiling run of a TaskManager (it fails: see rest.profiling; "
                     "needs the secret).")
async def task_manager_profiling(taskmanagerid: str, body: ProfilingRequest, ctx: Ctx,
                                 history: Profiling, request: Request) -> dict[str, Any]:
    authenticate(request, ctx.secret, "Profiling")
    tm = await _task_manager(ctx, taskmanagerid)
    return history.request(str(tm.resource_id), f"TaskManager {tm.resource_id}", body,
                           ctx.now_ms())


@router.get("/jobs/{jobid}/taskmanagers/{taskmanagerid}/log-url", tags=["taskmanagers"],
            summary="Where the web dashboard shows a TaskManager's logs.")
async def task_manager_log_url(jobid: str, taskmanagerid: str, request: Request) -> dict[str, str]:
    parse_id(JobID, "jobid", jobid)
    resource_id = parse_task_manager_id(taskmanagerid)
    return {"url": f"{dashboard_url(request)}/#/task-manager/{resource_id}/logs"}


@router.get(_TM + "/logs", tags=["taskmanagers"], summary="The log files of a TaskManager.")
async def task_manager_logs(taskmanagerid: str, ctx: Ctx) -> dict[str, Any]:
    resource_id = parse_task_manager_id(taskmanagerid)
    with not_found_errors():
        infos = await ctx.dispatcher.request_task_manager_log_list(resource_id)
    return {"logs": [{"name": i.name, "size": i.size, "mtime": i.mtime_ms} for i in infos]}


def _reader(ctx: RestContext, resource_id: ResourceID, name: str | None) -> LogReader:
    async def read(start: int, count: int) -> LogChunk:
        with not_found_errors():
            return await ctx.dispatcher.request_task_manager_log(resource_id, name, start, count)

    return read


@router.get(_TM + "/logs/{filename}", tags=["taskmanagers"], openapi_extra=LOG_FILE,
            summary="One log file of a TaskManager (text; paged with start/count or Range).")
async def task_manager_log_file(taskmanagerid: str, filename: str, request: Request, ctx: Ctx,
                                page: Annotated[LogRange, Depends()]) -> Response:
    resource_id = parse_task_manager_id(taskmanagerid)
    name = log_file_name(filename)
    return await log_file_response(_reader(ctx, resource_id, name), request, page.start,
                                   page.count, page.download)


@router.get(_TM + "/log", tags=["taskmanagers"], openapi_extra=LOG_FILE,
            summary="The process log of a TaskManager.")
async def task_manager_main_log(taskmanagerid: str, request: Request, ctx: Ctx,
                                page: Annotated[LogRange, Depends()]) -> Response:
    resource_id = parse_task_manager_id(taskmanagerid)
    return await log_file_response(_reader(ctx, resource_id, None), request, page.start,
                                   page.count, page.download)


@router.get(_TM + "/stdout", tags=["taskmanagers"], openapi_extra=LOG_FILE,
            summary="The TaskManager's stdout: its process log, which its stdout goes to.")
async def task_manager_stdout(taskmanagerid: str, request: Request, ctx: Ctx,
                              page: Annotated[LogRange, Depends()]) -> Response:
    """The process log (``cluster start`` sends stdout and stderr there); what a task prints is
    in its task log (``GET /taskmanagers/:id/logs``)."""
    return await task_manager_main_log(taskmanagerid, request, ctx, page)
