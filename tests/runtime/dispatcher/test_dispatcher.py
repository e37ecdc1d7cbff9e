"""Dispatcher against testing JobMasters and a testing ResourceManager (STYLE layer 2)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from flintlock.config import Configuration
from flintlock.runtime.dispatcher.dispatcher import Dispatcher
from flintlock.runtime.dispatcher.exceptions import (
    DuplicateJobSubmissionException,
    FlinkJobNotFoundException,
    JobSubmissionException,
)
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobResult
from flintlock.runtime.ids import JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobStatus, JobType
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.resourcemanager.gateway import ResourceManagerGateway, ResourceOverview
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.waiting import wait_until


def _job(name: str = "job", configuration: dict[str, str] | None = None) -> JobGraph:
    v = JobVertex(JobVertexID.generate(), "Source: x", 1, 128, "flintlock.testing.invokables:NoOpInvokable")
    return JobGraph(JobID.generate(), name, JobType.BATCH, (v,), configuration or {})


def _archived(jg: JobGraph, state: JobStatus) -> ArchivedExecutionGraph:
    return ArchivedExecutionGraph(jg.job_id, jg.name, jg.job_type, state,
                                  {"INITIALIZING": 1, state.name: 5}, ())


class FakeJobMaster(TestingEndpoint):
    """A JobMaster stand-in: records construction and lets the test end the job."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        jg: JobGraph = kwargs["job_graph"]
        super().__init__(
            f"jobmaster-{jg.job_id}", JobMasterGateway,
            request_job=lambda: _archived(jg, JobStatus.RUNNING),
            request_job_status=lambda: JobStatus.RUNNING,
        )
        kwargs["rpc_service"].register(self)

    def finish(self, status: str = "SUCCEEDED") -> None:
        jg: JobGraph = self.kwargs["job_graph"]
        state = {"SUCCEEDED": JobStatus.FINISHED, "FAILED": JobStatus.FAILED,
                 "CANCELED": JobStatus.CANCELED}[status]
        self.kwargs["on_terminal"](_archived(jg, state), JobResult(jg.job_id, jg.name, status, 4))


async def _setup(conf: dict[str, str] | None = None, **dispatcher: Any) -> tuple[Any, ...]:
    rpc = InProcRpcService()
    rm = TestingEndpoint("resourcemanager", ResourceManagerGateway,
                         request_resource_overview=lambda: ResourceOverview(2, 4, 3))
    rpc.register(rm)
    await rm.start()
    masters: list[FakeJobMaster] = []

    def factory(**kwargs: Any) -> FakeJobMaster:
        jm = FakeJobMaster(**kwargs)
        masters.append(jm)
        return jm

    d = Dispatcher(rpc, Configuration(conf or {}), rm.address, job_master_factory=factory,
                   **dispatcher)
    await d.start()
    gw = await rpc.connect(d.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_ID)
    return rpc, rm, d, gw, masters


def test_submit_runs_a_job_master_and_keeps_the_result() -> None:
    async def body() -> None:
        rpc, rm, d, gw, masters = await _setup({"heartbeat.timeout": "5 s"})
        jg = _job("wordcount", {"parallelism.default": "3"})
        await gw.submit_job(jg)
        await wait_until(lambda: masters and masters[0].is_running, describe=lambda: "job master start")
        # the JobMaster sees the cluster configuration overlaid with the job's own keys
        conf: Configuration = masters[0].kwargs["configuration"]
        assert conf.get_raw("heartbeat.timeout") == "5 s"
        assert conf.get_raw("parallelism.default") == "3"
        await wait_until(lambda: d._running[jg.job_id].gateway is not None, describe=lambda: "gateway")
        assert await gw.request_job_status(jg.job_id) is JobStatus.RUNNING
        assert await gw.request_job_result(jg.job_id) is None
        masters[0].finish("SUCCEEDED")
        await wait_until(lambda: not masters[0].is_running, describe=lambda: "job master stopped")
        result = await gw.request_job_result(jg.job_id)
        assert result is not None and result.application_status == "SUCCEEDED"
        assert await gw.request_job_status(jg.job_id) is JobStatus.FINISHED
        jobs = await gw.list_jobs()
        assert [(j.job_id, j.state) for j in jobs] == [(jg.job_id, JobStatus.FINISHED)]
        overview = await gw.request_cluster_overview()
        assert (overview.jobs_running, overview.jobs_finished, overview.resources.number_of_slots) == (0, 1, 4)
        await d.stop()
        await rm.stop()

    asyncio.run(body())


def test_duplicate_unknown_and_invalid_submissions_are_rejected() -> None:
    async def body() -> None:
        rpc, rm, d, gw, masters = await _setup()
        jg = _job()
        await gw.submit_job(jg)
        with pytest.raises(DuplicateJobSubmissionException, match=str(jg.job_id)):
            await gw.submit_job(jg)
        unknown = JobID.generate()
        with pytest.raises(FlinkJobNotFoundException, match=str(unknown)):
            await gw.request_job_status(unknown)
        with pytest.raises(FlinkJobNotFoundException):
            await gw.cancel_job(unknown)
        bad = _job("bad", {"heartbeat.timeout": "soon"})
        with pytest.raises(JobSubmissionException, match="heartbeat.timeout"):
            await gw.submit_job(bad)
        await d.stop()
        await rm.stop()

    asyncio.run(body())


def test_cancel_is_forwarded_to_the_job_master() -> None:
    async def body() -> None:
        rpc, rm, d, gw, masters = await _setup()
        jg = _job()
        await gw.submit_job(jg)
        await wait_until(lambda: d._running[jg.job_id].gateway is not None, describe=lambda: "gateway")
        await gw.cancel_job(jg.job_id)
        await masters[0].wait_for_call("cancel")
        masters[0].finish("CANCELED")
        await wait_until(lambda: jg.job_id in d._completed, describe=lambda: "completion")
        assert (await gw.request_job_result(jg.job_id)).application_status == "CANCELED"
        # cancelling a finished job is acknowledged and changes nothing
        await gw.cancel_job(jg.job_id)
        assert await gw.request_job_status(jg.job_id) is JobStatus.CANCELED
        await d.stop()
        await rm.stop()

    asyncio.run(body())


class BlockingReleaseSink:
    """A sink whose ``release`` (run by the Dispatcher after the result is recorded) waits for
    the test and records the thread it ran in."""

    def __init__(self) -> None:
        self.may_return = threading.Event()
        self.released: list[tuple[str, str]] = []

    def release(self, job_id: str) -> None:
        self.released.append((job_id, threading.current_thread().name))
        self.may_return.wait(30)


async def _submit_with_blocking_sink(d: Any, gw: Any) -> tuple[BlockingReleaseSink, JobGraph]:
    """Submit a one-vertex job whose sink's release blocks; return once its JobMaster runs."""
    sink = BlockingReleaseSink()
    v = JobVertex(JobVertexID.generate(), "Sink: x", 1, 128,
                  "flintlock.testing.invokables:NoOpInvokable", sinks=(sink,))
    jg = JobGraph(JobID.generate(), "with sink", JobType.BATCH, (v,), {})
    await gw.submit_job(jg)
    await wait_until(lambda: d._running[jg.job_id].gateway is not None, describe=lambda: "gateway")
    return sink, jg


def test_a_finished_jobs_result_is_handed_out_after_its_sinks_released_off_the_loop() -> None:
    async def body() -> None:
        rpc, rm, d, gw, masters = await _setup()
        sink, jg = await _submit_with_blocking_sink(d, gw)
        masters[0].finish("SUCCEEDED")
        await wait_until(lambda: sink.released, describe=lambda: "release called")
        # the release blocks a thread of the I/O pool, not the loop: the Dispatcher answers,
        # the job is FINISHED, and its result waits for the release
        assert sink.released == [(str(jg.job_id), sink.released[0][1])]
        assert sink.released[0][1].startswith("flintlock-io")
        assert await gw.request_job_status(jg.job_id) is JobStatus.FINISHED
        assert await gw.request_job_result(jg.job_id) is None
        sink.may_return.set()
        await wait_until(lambda: jg.job_id not in d._releasing, describe=lambda: "released")
        result = await gw.request_job_result(jg.job_id)
        assert result is not None and result.application_status == "SUCCEEDED"
        await d.stop()
        await rm.stop()

    asyncio.run(body())


def test_a_blocking_result_query_answers_when_the_result_is_there_or_after_its_timeout() -> None:
    """``request_job_result(job, timeout_s)``: None after the timeout while the job runs; during
    a wait, the answer comes as soon as the result can be handed out (after the sinks' release),
    not at the end of the timeout."""
    async def body() -> None:
        rpc, rm, d, gw, masters = await _setup()
        sink, jg = await _submit_with_blocking_sink(d, gw)
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await gw.request_job_result(jg.job_id, 0.05) is None
        assert loop.time() - started >= 0.05
        waiting = asyncio.ensure_future(gw.request_job_result(jg.job_id, 30.0, timeout=40.0))
        # the wait does not hold the Dispatcher's mailbox: other calls are answered meanwhile
        assert await gw.request_job_status(jg.job_id) is JobStatus.RUNNING
        masters[0].finish("SUCCEEDED")
        await wait_until(lambda: sink.released, describe=lambda: "release called")
        assert not waiting.done()  # FINISHED, but the result waits for the release
        sink.may_return.set()
        result = await asyncio.wait_for(waiting, 10.0)
        assert result is not None and result.application_status == "SUCCEEDED"
        with pytest.raises(FlinkJobNotFoundException):
            await gw.request_job_result(JobID.generate(), 0.05)
        await d.stop()
        await rm.stop()

    asyncio.run(body())


def test_job_master_that_fails_to_start_fails_the_job_with_its_cause() -> None:
    async def body() -> None:
        rpc = InProcRpcService()

        class Broken:
            address = "inproc://broken"

            async def start(self) -> None:
                raise RuntimeError("cannot list input splits: /no/such/path")

            async def stop(self) -> None:
                pass

        d = Dispatcher(rpc, Configuration(), "inproc://rm", job_master_factory=lambda **kw: Broken())
        await d.start()
        gw = await rpc.connect(d.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_ID)
        jg = _job()
        await gw.submit_job(jg)
        await wait_until(lambda: jg.job_id in d._completed, describe=lambda: "failure")
        result = await gw.request_job_result(jg.job_id)
        assert result.application_status == "FAILED"
        assert "/no/such/path" in result.failure.error.message
        await d.stop()

    asyncio.run(body())
