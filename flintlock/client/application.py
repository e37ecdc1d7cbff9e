"""Application mode inside the JobManager: run the program's main() against its own Dispatcher.

Follows Flink ``client/deployment/application/{ApplicationDispatcherBootstrap,EmbeddedExecutor}``:
the JobManager of an application cluster runs the user's ``main()`` in a thread of its own
process; every ``execute()`` / ``execute_async()`` submits the JobGraph to the cluster's
Dispatcher directly (``execution.target: embedded``), with no REST hop and no client. When
``main()`` has returned and every job it submitted has ended, the application's status decides
the process's exit code and (``execution.shutdown-on-application-finish``) the cluster shuts down.

Application status (Flink ``ApplicationStatus``): SUCCEEDED when main() returned and every job
FINISHED; CANCELED when a job was cancelled (Flink cancels the whole application then); FAILED
when main() raised or a job FAILED.

With high availability the application's jobs get stable ids (Flink's fixed job ids of
``ApplicationDispatcherBootstrap``): the n-th ``execute()`` of main() is job
``stable_job_id(<high-availability.cluster-id>, n)``. A JobManager that takes over runs main()
again; a job id the Dispatcher already knows (running, recovered from the JobGraph store, or
finished, from the JobResultStore) is followed instead of submitted again, so no job runs twice
and main() continues where the jobs are.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import hashlib
import logging
import threading
import traceback
from dataclasses import dataclass
from typing import Any

from flintlock.client.context import ClientContext
from flintlock.client.executor import DispatcherJobClient
from flintlock.client.program import run_program
from flintlock.config import Configuration
from flintlock.config.options import EXECUTION_TARGET
from flintlock.runtime.dispatcher.exceptions import DuplicateJobSubmissionException
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph

__all__ = ["ApplicationResult", "ApplicationSpec", "ApplicationStatus", "EmbeddedExecutor",
           "run_application", "stable_job_id"]

log = logging.getLogger(__name__)

#: how long a Dispatcher call from the program's thread may take (seconds)
_CALL_TIMEOUT_S = 120.0


class ApplicationStatus(enum.Enum):
    """How an application ended, with the JobManager process's exit code."""

    SUCCEEDED = 0
    FAILED = 1
    CANCELED = 2

    @property
    def exit_code(self) -> int:
        return int(self.value)


@dataclass(frozen=True)
class ApplicationSpec:
    """The program an application cluster runs: its file and arguments."""

    program: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApplicationResult:
    status: ApplicationStatus
    #: JobID -> the job's outcome (``JobResult.application_status``: SUCCEEDED, FAILED, CANCELED)
    jobs: dict[str, str]
    diagnostics: str = ""


def stable_job_id(application_id: str, index: int) -> JobID:
    """The id of the application's ``index``-th job (0: main()'s first ``execute()``): 16
    bytes of BLAKE2b over the application id (``high-availability.cluster-id``) and the index."""
    digest = hashlib.blake2b(f"flintlock-application/{application_id}/{index}".encode(),
                             digest_size=16)
    return JobID.from_hex(digest.hexdigest())


class EmbeddedExecutor:
    """Submits the program's jobs to the Dispatcher of this process (Flink ``EmbeddedExecutor``).

    Called from the program's thread; the Dispatcher lives on ``loop``. With ``application_id``
    (high availability) the jobs get stable ids and a job the Dispatcher already knows is
    followed instead of submitted.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, dispatcher: Any,
                 application_id: str | None = None) -> None:
        self._loop = loop
        self._dispatcher = dispatcher
        self._application_id = application_id
        self._submitted = 0
        self._lock = threading.Lock()

    def run(self, coroutine: Any) -> Any:
        """Run a Dispatcher call on its loop and wait for the answer.

        Raises:
            TimeoutError: no answer within 120 s (the JobManager is stopping).
        """
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_CALL_TIMEOUT_S)

    def execute(self, job_graph: JobGraph, configuration: Configuration) -> DispatcherJobClient:
        if self._application_id is None:
            self.run(self._dispatcher.submit_job(job_graph))
            log.info("Application submitted job %s (%s)", job_graph.job_id, job_graph.name)
        else:
            with self._lock:
                index, self._submitted = self._submitted, self._submitted + 1
            job_id = stable_job_id(self._application_id, index)
            plan = {**job_graph.plan, "jid": str(job_id)} if job_graph.plan else job_graph.plan
            job_graph = dataclasses.replace(job_graph, job_id=job_id, plan=plan)
            try:
                self.run(self._dispatcher.submit_job(job_graph))
                log.info("Application submitted job %d: %s (%s)", index, job_id, job_graph.name)
            except DuplicateJobSubmissionException:
                log.info("Application job %d: %s (%s) was submitted by an earlier leader; "
                         "following it", index, job_id, job_graph.name)
        return DispatcherJobClient(self.run, self._dispatcher, job_graph.job_id, job_graph.name,
                                   show_progress=False)


async def run_application(spec: ApplicationSpec, dispatcher: Any, configuration: Configuration,
                          stop: asyncio.Event, poll_interval_s: float = 0.2,
                          application_id: str | None = None) -> ApplicationResult | None:
    """Run ``spec``'s main() in a daemon thread, then wait for every job it submitted to end.

    Returns the application's result, or None when ``stop`` was set first (the JobManager was
    told to stop, or lost its leadership: its jobs are stopped or suspended with it, the
    program's thread is abandoned). ``application_id``: give the jobs stable ids (high
    availability, ``stable_job_id``).
    """
    loop = asyncio.get_running_loop()
    context = ClientContext(overrides=configuration.copy().set(EXECUTION_TARGET, "embedded"),
                            show_progress=False,
                            embedded=EmbeddedExecutor(loop, dispatcher, application_id))
    main_done: asyncio.Future[BaseException | None] = loop.create_future()

    def main() -> None:
        error: BaseException | None = None
        try:
            run_program(spec.program, list(spec.args), context)
        except BaseException as exc:  # reported as the application's failure
            error = exc

        def finish() -> None:
            if not main_done.done():
                main_done.set_result(error)

        if not loop.is_closed():
            loop.call_soon_threadsafe(finish)

    log.info("Running the application's main(): %s %s", spec.program, " ".join(spec.args))
    threading.Thread(target=main, name="application-main", daemon=True).start()
    stopped = asyncio.ensure_future(stop.wait())
    waited: list[asyncio.Future[Any]] = [main_done, stopped]
    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if not main_done.done() or stop.is_set():
        stopped.cancel()
        return None
    stopped.cancel()
    error = main_done.result()
    jobs: dict[str, str] = {}
    pending = list(context.submitted)  # execute_async() and detached jobs may still run
    cancelling = False
    while pending:
        for job_id in list(pending):
            result = await dispatcher.request_job_result(JobID.from_hex(job_id))
            if result is not None:
                jobs[job_id] = result.application_status
                pending.remove(job_id)
        if "CANCELED" in jobs.values() and pending and not cancelling:
            cancelling = True  # as Flink: a cancelled job cancels the whole application
            for job_id in pending:
                log.info("Cancelling job %s: another job of the application was cancelled", job_id)
                await dispatcher.cancel_job(JobID.from_hex(job_id))
        if pending:
            if stop.is_set():
                return None
            await asyncio.sleep(poll_interval_s)
    return _result(error, jobs)


def _result(error: BaseException | None, jobs: dict[str, str]) -> ApplicationResult:
    if "CANCELED" in jobs.values():
        status = ApplicationStatus.CANCELED
    elif error is not None or any(s != "SUCCEEDED" for s in jobs.values()):
        status = ApplicationStatus.FAILED
    else:
        status = ApplicationStatus.SUCCEEDED
    diagnostics = ""
    if error is not None:
        diagnostics = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return ApplicationResult(status, jobs, diagnostics)
