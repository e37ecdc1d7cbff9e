"""TaskManager handlers: ``/taskmanagers[/:id]``, ``/taskmanagers/:id/logs[/:filename]``,
``/taskmanagers/:id/log`` and ``/taskmanagers/:id/stdout``.

Logs are read from the TaskManager over RPC (REST -> Dispatcher -> ResourceManager ->
TaskExecutor, Flink's ``requestTaskManagerLogList`` / ``requestTaskManagerFileUploadByName``) in
chunks of at most 1 MiB; paging and headers: ``log_responses``. ``/taskmanagers`` entries carry
a flintlock ``spark`` object (the TaskManager's Spark session: master, version, ...) when the
TaskManager reported one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.responses import Response

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.logs.exceptions import LogFileNotFoundException
from flintlock.runtime.logs.files import LogChunk, check_log_file_name
from flintlock.runtime.resourcemanager.gateway import TaskManagerInfo
from flintlock.runtime.rest import messages
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.log_responses import LogReader, log_file_response
from flintlock.runtime.rest.observability import not_found_errors, parse_task_manager_id
from flintlock.runtime.rest.openapi import LOG_FILE
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router

__all__ = ["LogRange", "log_file_name", "router"]

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


@router.get("/taskmanagers", tags=["taskmanagers"], summary="Overview of all TaskManagers.")
async def task_managers(ctx: Ctx) -> dict[str, Any]:
    infos = await ctx.dispatcher.request_task_manager_infos()
    return {"taskmanagers": [_with_spark(messages.task_manager_info(tm), tm) for tm in infos]}


@router.get(_TM, tags=["taskmanagers"], summary="Details of one TaskManager.")
async def task_manager(taskmanagerid: str, ctx: Ctx) -> dict[str, Any]:
    tm = await _task_manager(ctx, taskmanagerid)
    return _with_spark(messages.task_manager_details(tm), tm)


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


@router.get(_TM + "/stdout", tags=["taskmanagers"], summary="Not captured separately.")
async def task_manager_stdout(taskmanagerid: str) -> Response:
    parse_task_manager_id(taskmanagerid)
    raise RestHandlerException(
        404, "The TaskManager's stdout is not captured separately: what a task prints is in its "
             "task log (GET /taskmanagers/:id/logs), the process output in its process log "
             "(GET /taskmanagers/:id/log).")
