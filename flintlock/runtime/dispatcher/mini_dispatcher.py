"""MiniDispatcher: the Dispatcher of a per-job cluster runs one job, then the cluster ends.

Follows Flink 1.x ``dispatcher/MiniDispatcher`` (removed with per-job mode in Flink 2.0): the
first submitted job is the cluster's job and any other submission is refused. Once that job is
globally terminal the cluster shuts down: at once when the client submitted it detached
(``ClusterEntrypoint.ExecutionMode.DETACHED``), otherwise after the client fetched the job's
result (``GET /jobs/:jobid/execution-result``) and one more second for its last look at the job,
so an attached client never finds the cluster gone before it learnt how the job ended, or after
``result_wait_s`` when no client asks.

A decorator of the ``DispatcherGateway`` the REST API uses; the Dispatcher itself is unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from flintlock.runtime.dispatcher.exceptions import JobSubmissionException
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.job_graph import JobGraph

__all__ = ["MiniDispatcherGateway", "run_until_job_done"]

log = logging.getLogger(__name__)

#: how long the cluster serves after its attached client fetched the job's result (seconds)
_LAST_LOOK_S = 1.0

#: how the per-job JobManager process exits, by the job's ``JobResult.application_status``
EXIT_CODES = {"SUCCEEDED": 0, "FAILED": 1, "CANCELED": 2}


class MiniDispatcherGateway:
    """A DispatcherGateway that accepts one job and notices when its result has been served.

    Args:
        gateway: the Dispatcher's gateway; every other call passes through.
        attached: the client waits for the result (shut down after serving it).
    """

    def __init__(self, gateway: Any, attached: bool) -> None:
        self.dispatcher = gateway  # the Dispatcher's own gateway (not counted as served)
        self.attached = attached
        self.job_id: JobID | None = None
        self.submitted = asyncio.Event()
        self.result_served = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dispatcher, name)

    async def submit_job(self, job_graph: JobGraph) -> Any:
        """Raises:
            JobSubmissionException: this cluster already runs another job."""
        if self.job_id is not None and job_graph.job_id != self.job_id:
            raise JobSubmissionException(
                f"this per-job cluster runs job {self.job_id} only; submit {job_graph.job_id} to "
                "a session cluster or its own per-job cluster")
        self.job_id = job_graph.job_id
        try:
            answer = await self.dispatcher.submit_job(job_graph)
        except BaseException:
            self.job_id = None
            raise
        self.submitted.set()
        return answer

    async def request_job_result(self, job_id: JobID, timeout_s: float = 0.0,
                                 **call: Any) -> JobResult | None:
        """The Dispatcher's answer (``call``: the gateway call's options, e.g. ``timeout``)."""
        result: JobResult | None = await self.dispatcher.request_job_result(job_id, timeout_s,
                                                                             **call)
        if result is not None and job_id == self.job_id:
            self.result_served.set()
        return result


async def run_until_job_done(mini: MiniDispatcherGateway, stop: asyncio.Event,
                             result_wait_s: float = 300.0, poll_s: float = 0.2) -> int:
    """Wait for the cluster's job to end (and, attached, for its result to be served), set
    ``stop`` and return the process's exit code (0 succeeded, 1 failed, 2 cancelled); 2 when
    ``stop`` was set first."""
    waiting = asyncio.ensure_future(stop.wait())
    submitted = asyncio.ensure_future(mini.submitted.wait())
    await asyncio.wait([waiting, submitted], return_when=asyncio.FIRST_COMPLETED)
    submitted.cancel()
    if stop.is_set() or mini.job_id is None:
        return EXIT_CODES["CANCELED"]
    job_id = mini.job_id
    while (result := await mini.dispatcher.request_job_result(job_id)) is None:
        if stop.is_set():
            return EXIT_CODES["CANCELED"]
        await asyncio.sleep(poll_s)
    log.info("The per-job cluster's job %s ended %s", job_id, result.application_status)
    if mini.attached:
        served = asyncio.ensure_future(mini.result_served.wait())
        done, _ = await asyncio.wait([served, waiting], timeout=result_wait_s,
                                     return_when=asyncio.FIRST_COMPLETED)
        served.cancel()
        if not done:
            log.warning("No client fetched the result of job %s within %.0f s; shutting down",
                        job_id, result_wait_s)
        elif not stop.is_set():  # the client's last look at the job (its failure report)
            await asyncio.wait([waiting], timeout=_LAST_LOOK_S)
    waiting.cancel()
    stop.set()
    return EXIT_CODES.get(result.application_status, 1)
