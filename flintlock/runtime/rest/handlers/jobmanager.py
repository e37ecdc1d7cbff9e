"""JobManager handlers: ``/jobmanager/config``, ``/jobmanager/logs[/:filename]``,
``/jobmanager/log``, ``/jobmanager/stdout`` (``/jobmanager/metrics`` is in ``metrics``) and
``/jobmanager/high-availability`` (flintlock's: the leader and the standby JobManagers).

The configuration is Flink's ``ConfigurationInfo`` (a list of ``{"key", "value"}`` sorted by key)
with sensitive values masked as Flink's ``GlobalConfiguration.isSensitive`` does. Log files are the
JobManager process's own (``env.log.dir``), read in chunks like TaskManager logs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response

from flintlock.config.sensitive import hidden_items
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.logs.files import LogChunk, LogDirectory
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.handlers.taskmanagers import LogRange, log_file_name
from flintlock.runtime.rest.log_responses import LogReader, log_file_response
from flintlock.runtime.rest.observability import Obs, not_found_errors
from flintlock.runtime.rest.openapi import LOG_FILE
from flintlock.runtime.rest.routing import Ctx, new_router

__all__ = ["router"]

router = new_router()


@router.get("/jobmanager/config", tags=["jobmanager"], summary="The cluster configuration.")
async def job_manager_config(ctx: Ctx) -> list[dict[str, str]]:
    items = sorted(hidden_items(ctx.configuration.to_dict()).items())
    return [{"key": k, "value": v} for k, v in items]


def _logs(obs: Obs) -> LogDirectory:
    if obs.job_manager_logs is None:
        raise RestHandlerException(404, "The JobManager has no log files (it runs without "
                                        "env.log.dir, e.g. inside a test or a MiniCluster).")
    return obs.job_manager_logs


def _reader(logs: LogDirectory, name: str | None) -> LogReader:
    async def read(start: int, count: int) -> LogChunk:
        with not_found_errors():
            return await run_blocking(logs.read, name, start, count)

    return read


@router.get("/jobmanager/logs", tags=["jobmanager"], summary="The JobManager's log files.")
async def job_manager_logs(obs: Obs) -> dict[str, Any]:
    if obs.job_manager_logs is None:
        return {"logs": []}
    infos = await run_blocking(obs.job_manager_logs.list_logs)
    return {"logs": [{"name": i.name, "size": i.size, "mtime": i.mtime_ms} for i in infos]}


@router.get("/jobmanager/logs/{filename}", tags=["jobmanager"], openapi_extra=LOG_FILE,
            summary="One JobManager log file (text; paged with start/count or Range).")
async def job_manager_log_file(filename: str, request: Request, obs: Obs,
                               page: Annotated[LogRange, Depends()]) -> Response:
    name = log_file_name(filename)
    return await log_file_response(_reader(_logs(obs), name), request, page.start, page.count,
                                   page.download)


@router.get("/jobmanager/log", tags=["jobmanager"], openapi_extra=LOG_FILE,
            summary="The JobManager's process log.")
async def job_manager_main_log(request: Request, obs: Obs,
                               page: Annotated[LogRange, Depends()]) -> Response:
    return await log_file_response(_reader(_logs(obs), None), request, page.start, page.count,
                                   page.download)


@router.get("/jobmanager/stdout", tags=["jobmanager"], summary="Not captured separately.")
async def job_manager_stdout() -> Response:
    raise RestHandlerException(
        404, "The JobManager's stdout is not captured separately; see GET /jobmanager/log.")


@router.get("/jobmanager/high-availability", tags=["jobmanager"],
            summary="The HA type, the leader and the standby JobManagers (flintlock).")
async def job_manager_high_availability(ctx: Ctx) -> dict[str, Any]:
    """``job_managers.describe``'s document; without high availability ``{"type": "NONE",
    "leader": null, "jobmanagers": []}``. 503 when the HA store cannot be read."""
    if ctx.high_availability is None:
        return {"type": "NONE", "cluster-id": None, "storage-dir": None, "leader": None,
                "jobmanagers": []}
    try:
        return await run_blocking(ctx.high_availability)
    except Exception as exc:  # ZooKeeper unreachable, storage unreadable
        raise RestHandlerException(
            503, f"The high-availability store cannot be read: {type(exc).__name__}: {exc}"
        ) from None
