"""MiniDispatcher: a per-job cluster's Dispatcher runs one job and says when the cluster may end
(a recording Dispatcher gateway, no cluster)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from flintlock.runtime.dispatcher.exceptions import JobSubmissionException
from flintlock.runtime.dispatcher.mini_dispatcher import MiniDispatcherGateway, run_until_job_done
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import JobID


@dataclass
class Graph:
    job_id: JobID = field(default_factory=JobID.generate)
    name: str = "job"


@dataclass
class RecordingDispatcher:
    outcome: str | None = None  # the job's application status once it ended
    submitted: list[JobID] = field(default_factory=list)
    #: (timeout_s, the gateway call's options) of each result request
    result_calls: list[tuple[float, dict[str, Any]]] = field(default_factory=list)

    async def submit_job(self, job_graph: Graph) -> str:
        self.submitted.append(job_graph.job_id)
        return "ack"

    async def request_job_result(self, job_id: JobID, timeout_s: float = 0.0,
                                 **call: Any) -> JobResult | None:
        self.result_calls.append((timeout_s, call))
        return None if self.outcome is None else JobResult(job_id, "job", self.outcome, 7)

    async def list_jobs(self) -> tuple[str, ...]:
        return ("passed through",)


def test_the_first_job_is_the_clusters_and_others_are_refused() -> None:
    async def main() -> None:
        dispatcher = RecordingDispatcher()
        mini = MiniDispatcherGateway(dispatcher, attached=True)
        first = Graph()
        assert await mini.submit_job(first) == "ack"
        assert await mini.submit_job(first) == "ack"  # a retried submission of the same job
        with pytest.raises(JobSubmissionException, match=f"runs job {first.job_id} only"):
            await mini.submit_job(Graph())
        assert dispatcher.submitted == [first.job_id, first.job_id]
        assert await mini.list_jobs() == ("passed through",)

    asyncio.run(main())


@pytest.mark.parametrize(("outcome", "code"), [("SUCCEEDED", 0), ("FAILED", 1), ("CANCELED", 2)])
def test_a_detached_cluster_ends_when_its_job_ends_with_the_jobs_status(outcome: str,
                                                                        code: int) -> None:
    async def main() -> None:
        dispatcher = RecordingDispatcher()
        mini, stop = MiniDispatcherGateway(dispatcher, attached=False), asyncio.Event()
        done = asyncio.create_task(run_until_job_done(mini, stop, poll_s=0.01))
        await asyncio.sleep(0.05)
        assert not done.done()  # no job yet
        await mini.submit_job(Graph())
        await asyncio.sleep(0.05)
        assert not done.done()  # the job runs
        dispatcher.outcome = outcome
        assert await asyncio.wait_for(done, 5) == code
        assert stop.is_set()

    asyncio.run(main())


def test_an_attached_cluster_waits_until_the_client_fetched_the_result() -> None:
    async def main() -> None:
        dispatcher = RecordingDispatcher(outcome="SUCCEEDED")
        mini, stop = MiniDispatcherGateway(dispatcher, attached=True), asyncio.Event()
        done = asyncio.create_task(run_until_job_done(mini, stop, poll_s=0.01))
        graph = Graph()
        await mini.submit_job(graph)
        await asyncio.sleep(0.1)
        assert not done.done()  # ended, but nobody asked how
        # as REST asks with wait-ms: the wait and the RPC call's own timeout pass through
        result = await mini.request_job_result(graph.job_id, 0.5, timeout=10.5)
        assert result is not None and result.application_status == "SUCCEEDED"
        assert dispatcher.result_calls[-1] == (0.5, {"timeout": 10.5})
        assert await asyncio.wait_for(done, 5) == 0

    asyncio.run(main())


def test_an_attached_cluster_whose_client_is_gone_ends_after_the_wait() -> None:
    async def main() -> None:
        mini = MiniDispatcherGateway(RecordingDispatcher(outcome="FAILED"), attached=True)
        stop = asyncio.Event()
        done = asyncio.create_task(run_until_job_done(mini, stop, result_wait_s=0.2, poll_s=0.01))
        await mini.submit_job(Graph())
        assert await asyncio.wait_for(done, 5) == 1

    asyncio.run(main())


def test_a_stopped_cluster_reports_cancelled() -> None:
    async def main() -> None:
        stop = asyncio.Event()
        stop.set()
        mini = MiniDispatcherGateway(RecordingDispatcher(), attached=True)
        assert await run_until_job_done(mini, stop) == 2

    asyncio.run(main())
