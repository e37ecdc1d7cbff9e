"""JobManager handlers: ``/jobmanager/config``, ``/jobmanager/environment``,
``/jobmanager/thread-dump``, ``/jobmanager/profiler`` (GET, POST), ``/jobmanager/logs[/:filename]``,
``/jobmanager/log``, ``/jobmanager/stdout`` (``/jobmanager/metrics`` is in ``metrics``),
``/jobmanager/high-availability`` (flintlock's: the leader and the standby JobManagers), and the
per-job views of the JobManager Flink's history server shows: ``/jobs/:jobid/jobmanager/config``,
``/jobs/:jobid/jobmanager/environment`` and ``/jobs/:jobid/jobmanager/log-url``.

The configuration is Flink's ``ConfigurationInfo`` (a list of ``{"key", "value"}`` sorted by key)
with sensitive values masked as Flink's ``GlobalConfiguration.isSensitive`` does; the per-job
configuration is the cluster's, as Flink's ``JobManagerJobConfigurationHandler`` serves it. The
environment (``EnvironmentInfo``) and the thread dump (``ThreadDumpInfo``, frames per thread:
``cluster.thread-dump.stacktrace-max-depth``) describe the JobManager's Python process
(``messages_cluster``, ``flintlock.runtime.thread_dump``); profiling: ``rest.profiling``. A log
url is Flink's ``GeneratedLogUrlHandler`` answer ``{"url": "<rest address>/#/job-manager/logs"}``.
Log files are the JobManager process's own (``env.log.dir``), read in chunks like TaskManager
logs.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import Response

from flintlock.config.options import THREAD_DUMP_MAX_DEPTH
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.ids import JobID
from flintlock.runtime.logs.files import LogChunk, LogDirectory
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.handlers.taskmanagers import LogRange, dashboard_url, log_file_name
from flintlock.runtime.rest.log_responses import LogReader, log_file_response
from flintlock.runtime.rest.messages_cluster import (
    configuration_info,
    environment_info,
    thread_dump_info,
)
from flintlock.runtime.rest.observability import Obs, not_found_errors
from flintlock.runtime.rest.openapi import LOG_FILE, SECURED
from flintlock.runtime.rest.profiling import Profiling, ProfilingRequest
from flintlock.runtime.rest.routing import Ctx, new_router, parse_id
from flintlock.runtime.rest.security import authenticate
from flintlock.runtime.thread_dump import thread_dump

__all__ = ["router"]

router = new_router()

_JOB_MANAGER = "JobManager"


@router.get("/jobmanager/config", tags=["jobmanager"], summary="The cluster configuration.")
async def job_manager_config(ctx: Ctx) -> list[dict[str, str]]:
    return configuration_info(ctx.configuration)


@router.get("/jobmanager/environment", tags=["jobmanager"],
            summary="The JobManager's interpreter, architecture, options and module path.")
async def job_manager_environment() -> dict[str, Any]:
    return environment_info()


@router.get("/jobmanager/thread-dump", tags=["jobmanager"],
            summary="The threads of the JobManager process with their stacks.")
async def job_manager_thread_dump(ctx: Ctx) -> dict[str, Any]:
    return thread_dump_info(thread_dump(ctx.configuration.get(THREAD_DUMP_MAX_DEPTH)))


@router.get("/jobmanager/profiler", tags=["jobmanager"],
            summary="Profiling runs of the JobManager (none can succeed: see rest.profiling).")
async def job_manager_profiling_list(history: Profiling) -> dict[str, Any]:
    return {"profilingList": history.runs(_JOB_MANAGER)}


@router.post("/jobmanager/profiler", tags=["jobmanager"], openapi_extra=SECURED,
             summary="Asks for a profiling run of the JobManager (it fails: see rest.profiling; "
                     "needs the secret).")
async def job_manager_profiling(body: ProfilingRequest, history: Profiling, request: Request,
                                ctx: Ctx) -> dict[str, Any]:
    authenticate(request, ctx.secret, "Profiling")
    return history.request(_JOB_MANAGER, _JOB_MANAGER, body, ctx.now_ms())


@router.get("/jobs/{jobid}/jobmanager/config", tags=["jobmanager"],
            summary="The JobManager configuration a job runs with (the cluster's).")
async def job_manager_job_config(jobid: str, ctx: Ctx) -> list[dict[str, str]]:
    parse_id(JobID, "jobid", jobid)
    return configuration_info(ctx.configuration)


@router.get("/jobs/{jobid}/jobmanager/environment", tags=["jobmanager"],
            summary="The environment of the JobManager a job runs on.")
async def job_manager_job_environment(jobid: str) -> dict[str, Any]:
    parse_id(JobID, "jobid", jobid)
    return environment_info()


@router.get("/jobs/{jobid}/jobmanager/log-url", tags=["jobmanager"],
            summary="Where the web dashboard shows the JobManager's logs.")
async def job_manager_log_url(jobid: str, request: Request) -> dict[str, str]:
    parse_id(JobID, "jobid", jobid)
    return {"url": f"{dashboard_url(request)}/#/job-manager/logs"}


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


@router.get("/jobmanager/stdout", tags=["jobmanager"], openapi_extra=LOG_FILE,
            summary="The JobManager's stdout: the process log, which its stdout goes to.")
async def job_manager_stdout(request: Request, obs: Obs,
                             page: Annotated[LogRange, Depends()]) -> Response:
    """``flintlock cluster start`` sends a process's stdout and stderr into its log file, so
    Flink's ``.out`` file is the process log here."""
    return await job_manager_main_log(request, obs, page)


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
