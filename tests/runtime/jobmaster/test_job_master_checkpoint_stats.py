"""Layer 2: a real JobMaster puts its checkpoint statistics into ``request_job`` and into the
graph it archives when the job ends (``ArchivedExecutionGraph.checkpoint_stats``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobResult
from flintlock.runtime.ids import AllocationID, JobID, JobVertexID, ResourceID
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.jobmaster.job_master import JobMaster
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse, ResourceManagerGateway
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.runtime.taskexecutor.gateway import SlotOffer, TaskExecutorGateway
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState
from flintlock.testing.gateways import TestingEndpoint

TM = ResourceID("tm-1")
DEADLINE_S = 10.0


class _Source:
    def describe(self) -> str:
        return "list"

    def output_schema(self) -> str | None:
        return "k string"

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        return [[i] for i in range(parallelism)]


def _job(job_type: JobType) -> JobGraph:
    src = JobVertex(JobVertexID.generate(), "src", 2, 128, "tests:Noop", source=_Source())
    return JobGraph(JobID.generate(), "events", job_type, (src,))


async def _started(job: JobGraph, conf: dict[str, str], clock: ManualClock,
                   terminal: list[tuple[ArchivedExecutionGraph, JobResult]],
                   ) -> tuple[InProcRpcService, JobMaster, TestingEndpoint, TestingEndpoint,
                              JobMasterGateway]:
    rpc = InProcRpcService()
    rm = TestingEndpoint("resourcemanager", ResourceManagerGateway,
                         register_job_master=lambda *a: RegistrationResponse(True, ResourceID("rm")))
    te = TestingEndpoint("taskexecutor-1", TaskExecutorGateway)
    jm = JobMaster(job, Configuration(conf), rpc, "inproc://resourcemanager",
                   on_terminal=lambda a, r: terminal.append((a, r)), clock=clock)
    for endpoint in (rm, te):
        rpc.register(endpoint)
        await endpoint.start()
    await jm.start()
    gw = await rpc.connect(jm.address, JobMasterGateway, fencing_token=DEFAULT_LEADER_ID)
    await rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
    return rpc, jm, rm, te, gw


async def _stop(rpc: InProcRpcService, *endpoints: Any) -> None:
    for endpoint in endpoints:
        await endpoint.stop()
    await rpc.close()


async def _poll(gw: JobMasterGateway, done: Any, what: str) -> ArchivedExecutionGraph:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while True:
        archived = await gw.request_job()
        if done(archived):
            return archived
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {archived.checkpoint_stats}")
        await asyncio.sleep(0)  # yield to the mailbox and the I/O executor; no fixed delay


def test_request_job_and_the_terminal_graph_carry_the_checkpoint_statistics(tmp_path: Path,
                                                                            ) -> None:
    async def test() -> None:
        clock = ManualClock()
        terminal: list[tuple[ArchivedExecutionGraph, JobResult]] = []
        job = _job(JobType.STREAMING)
        conf = {"execution.checkpointing.interval": "10 s",
                "state.checkpoints.dir": str(tmp_path / "cp"),
                "shuffle.storage-dir": str(tmp_path / "shuffle")}
        rpc, jm, rm, te, gw = await _started(job, conf, clock, terminal)
        try:
            stats = (await gw.request_job()).checkpoint_stats
            assert stats is not None and stats.config is not None
            assert stats.config.interval_ms == 10_000 and stats.history == ()

            response = await gw.register_task_manager(TM, te.address)
            assert response.success
            await gw.offer_slots(TM, tuple(SlotOffer(AllocationID.generate(), i)
                                           for i in range(2)))
            tdds = [c.args[0] for c in
                    await te.wait_for_call("submit_task", 2, timeout_s=DEADLINE_S)]
            for tdd in tdds:
                await gw.update_task_execution_state(TaskExecutionState(
                    job.job_id, tdd.attempt_id, ExecutionState.RUNNING, task_manager=str(TM)))

            clock.advance(10.0)  # the first periodic trigger
            await te.wait_for_call("trigger_checkpoint", 2, timeout_s=DEADLINE_S)
            (pending,) = (await gw.request_job()).checkpoint_stats.history  # type: ignore[union-attr]
            assert (pending.checkpoint_id, pending.status, pending.num_acknowledged) == (
                1, "IN_PROGRESS", 0)
            assert pending.trigger_timestamp_ms == clock.now_ms()

            for tdd in tdds:
                await gw.acknowledge_checkpoint(job.job_id, tdd.attempt_id, 1,
                                                TaskStateSnapshot({"position": 3}))
            archived = await _poll(
                gw, lambda a: a.checkpoint_stats.counts.completed == 1, "checkpoint 1 completed")
            assert archived.checkpoint_stats.latest_completed.checkpoint_id == 1

            await gw.cancel()
            for tdd in tdds:
                await gw.update_task_execution_state(TaskExecutionState(
                    job.job_id, tdd.attempt_id, ExecutionState.CANCELED, task_manager=str(TM)))
            result = await asyncio.wait_for(jm.wait_for_termination(), DEADLINE_S)
            assert result.application_status == "CANCELED"
            (final, _), = terminal
            assert final.state is JobStatus.CANCELED
            assert final.checkpoint_stats is not None
            assert final.checkpoint_stats.counts.completed == 1
            assert final.checkpoint_stats.latest_completed.status == "COMPLETED"  # type: ignore[union-attr]
        finally:
            await _stop(rpc, jm, te, rm)

    asyncio.run(asyncio.wait_for(test(), 30))


def test_a_batch_job_has_no_checkpoint_statistics(tmp_path: Path) -> None:
    async def test() -> None:
        terminal: list[tuple[ArchivedExecutionGraph, JobResult]] = []
        conf = {"execution.checkpointing.interval": "10 s",
                "shuffle.storage-dir": str(tmp_path / "shuffle")}
        rpc, jm, rm, te, gw = await _started(_job(JobType.BATCH), conf, ManualClock(), terminal)
        try:
            assert (await gw.request_job()).checkpoint_stats is None
        finally:
            await _stop(rpc, jm, te, rm)

    asyncio.run(asyncio.wait_for(test(), 30))
