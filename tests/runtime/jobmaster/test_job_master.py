"""Layer 2: a real JobMaster on the in-process transport against testing RM and TaskExecutors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.deployment import PartitionLocation, TaskDeploymentDescriptor
from flintlock.runtime.executiongraph.archived import ArchivedExecutionGraph, JobResult
from flintlock.runtime.highavailability.leader import LeadershipLostException
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateDataSetID,
    JobID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import (
    ExecutionState,
    JobStatus,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.jobmaster.job_master import JobMaster
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse, ResourceManagerGateway
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.runtime.taskexecutor.gateway import SlotOffer, TaskExecutorGateway
from flintlock.runtime.taskmanager.task_execution_state import (
    SerializedError,
    TaskExecutionState,
    TaskResult,
)
from flintlock.testing.gateways import TestingEndpoint

TM = ResourceID("tm-1")
DEADLINE_S = 10.0


class RecordingSink:
    def __init__(self, fail_prepare: bool = False) -> None:
        self.calls: list[tuple[str, str, list[Any]]] = []
        self.threads: set[str] = set()
        self.fail_prepare = fail_prepare

    def describe(self) -> str:
        return "recording"

    def prepare(self, job_id: str) -> None:
        self.threads.add(threading.current_thread().name)
        if self.fail_prepare:
            raise FileExistsError("output path /out already holds data")
        self.calls.append(("prepare", job_id, []))

    def commit(self, job_id: str, committables: list[Any]) -> None:
        self.calls.append(("commit", job_id, list(committables)))

    def abort(self, job_id: str, committables: list[Any]) -> None:
        self.calls.append(("abort", job_id, list(committables)))


class ListSource:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def describe(self) -> str:
        return "list"

    def output_schema(self) -> str | None:
        return "k string"

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        self.calls.append(parallelism)
        return [[f"split-{i}"] for i in range(parallelism)]


def make_job(
    producers: int,
    consumers: int | None,
    sink: RecordingSink | None = None,
    source: ListSource | None = None,
) -> JobGraph:
    """``src(producers) -HASH/BLOCKING-> sink(consumers)``, or just ``src`` when consumers is None."""
    src_id, dst_id = JobVertexID.generate(), JobVertexID.generate()
    sinks = (sink,) if sink is not None else ()
    if consumers is None:
        src = JobVertex(src_id, "src", producers, 128, "tests:Noop", source=source, sinks=sinks)
        return JobGraph(JobID.generate(), "job", JobType.BATCH, (src,))
    ds = IntermediateDataSet(IntermediateDataSetID.generate(), src_id, ResultPartitionType.BLOCKING, dst_id,
                             ShipStrategy.HASH, ("k",))
    src = JobVertex(src_id, "src", producers, 128, "tests:Noop", results=(ds,), source=source)
    dst = JobVertex(dst_id, "sink", consumers, 128, "tests:Noop",
                    inputs=(JobEdge(ds.id, dst_id, ShipStrategy.HASH),), sinks=sinks)
    return JobGraph(JobID.generate(), "job", JobType.BATCH, (src, dst), configuration={"pipeline.name": "job"})


class Harness:
    def __init__(self, job: JobGraph, conf: dict[str, str] | None = None, clock: ManualClock | None = None,
                 leadership_check: Any = None) -> None:
        self.job = job
        self.rpc = InProcRpcService()
        self.rm = TestingEndpoint(
            "resourcemanager", ResourceManagerGateway,
            register_job_master=lambda *a: RegistrationResponse(True, ResourceID("rm")),
        )
        self.te = TestingEndpoint("taskexecutor-1", TaskExecutorGateway)
        self.terminal: list[tuple[ArchivedExecutionGraph, JobResult]] = []
        self.jm = JobMaster(
            job, Configuration(conf or {}), self.rpc, "inproc://resourcemanager",
            on_terminal=lambda a, r: self.terminal.append((a, r)), clock=clock,
            leadership_check=leadership_check,
        )
        self.gw: JobMasterGateway

    async def __aenter__(self) -> Harness:
        for endpoint in (self.rm, self.te):
            self.rpc.register(endpoint)
            await endpoint.start()
        await self.jm.start()  # registered itself when constructed
        self.gw = await self.rpc.connect(self.jm.address, JobMasterGateway, fencing_token=DEFAULT_LEADER_ID)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for endpoint in (self.jm, self.te, self.rm):
            await endpoint.stop()
        await self.rpc.close()

    async def connect_task_manager(self, slots: int) -> tuple[SlotOffer, ...]:
        response = await self.gw.register_task_manager(TM, self.te.address)
        assert response.success
        offers = tuple(SlotOffer(AllocationID.generate(), i) for i in range(slots))
        return await self.gw.offer_slots(TM, offers)

    async def submitted(self, count: int) -> list[TaskDeploymentDescriptor]:
        calls = await self.te.wait_for_call("submit_task", count, timeout_s=DEADLINE_S)
        return [c.args[0] for c in calls]

    async def report(self, tdd: TaskDeploymentDescriptor, state: ExecutionState, **kw: Any) -> None:
        await self.gw.update_task_execution_state(
            TaskExecutionState(self.job.job_id, tdd.attempt_id, state, task_manager=str(TM), **kw)
        )

    async def finish(self, tdd: TaskDeploymentDescriptor, committables: dict[int, object] | None = None) -> None:
        locations = tuple(
            PartitionLocation(rp.partition_id, tdd.attempt_id, f"/shuffle/{rp.partition_id}",
                              (1,) * rp.number_of_subpartitions, (8,) * rp.number_of_subpartitions, "k string")
            for rp in tdd.produced_partitions
        )
        await self.report(tdd, ExecutionState.RUNNING)
        await self.report(tdd, ExecutionState.FINISHED,
                          result=TaskResult(partitions=locations, committables=committables or {}))

    async def result(self) -> JobResult:
        return await asyncio.wait_for(self.jm.wait_for_termination(), DEADLINE_S)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


async def poll(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0)  # yield to the mailboxes; no fixed delay


def test_batch_job_runs_to_completion_and_commits_sinks() -> None:
    async def test() -> None:
        sink, source = RecordingSink(), ListSource()
        job = make_job(2, 2, sink, source)
        async with Harness(job) as h:
            (reg,) = await h.rm.wait_for_call("register_job_master", timeout_s=DEADLINE_S)
            assert reg.args[0] == job.job_id and reg.args[1] == h.jm.address
            (decl,) = await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            assert decl.args[0].number_of_slots == 2 and decl.args[0].job_master_address == h.jm.address
            assert source.calls == [2]
            assert sink.calls == [("prepare", str(job.job_id), [])]
            assert "MainThread" not in sink.threads

            accepted = await h.connect_task_manager(3)
            assert len(accepted) == 2
            src = await h.submitted(2)
            assert [t.task_name_with_subtask() for t in src] == ["src (1/2)#0", "src (2/2)#0"]
            assert [t.source_splits for t in src] == [("split-0",), ("split-1",)]
            assert src[0].job_configuration == {"pipeline.name": "job"}
            status = await h.gw.request_job_status()
            assert status is JobStatus.RUNNING

            await h.finish(src[0])
            await h.finish(src[1])
            consumers = (await h.submitted(4))[2:]
            assert [t.task_name_with_subtask() for t in consumers] == ["sink (1/2)#0", "sink (2/2)#0"]
            for i, tdd in enumerate(consumers):
                (gate,) = tdd.input_gates
                assert (gate.subpartition_start, gate.subpartition_end) == (i, i)
                assert [p.producer_attempt for p in gate.partitions] == [src[0].attempt_id, src[1].attempt_id]
                assert [p.uri for p in gate.partitions] == [
                    f"/shuffle/{src[0].produced_partitions[0].partition_id}",
                    f"/shuffle/{src[1].produced_partitions[0].partition_id}",
                ]

            await h.finish(consumers[1], {0: "tmp-1"})
            await h.finish(consumers[0], {0: "tmp-0"})
            result = await h.result()
            assert result.application_status == "SUCCEEDED" and result.is_success
            assert sink.calls[-1] == ("commit", str(job.job_id), ["tmp-0", "tmp-1"])
            (archived, reported) = h.terminal[0]
            assert archived.state is JobStatus.FINISHED and reported is result
            assert archived.vertices[1].state is ExecutionState.FINISHED
            await h.rm.wait_for_call("disconnect_job_manager", timeout_s=DEADLINE_S)
            frees = await h.te.wait_for_call("free_slot", 2, timeout_s=DEADLINE_S)
            assert {c.args[0] for c in frees} == {a.allocation_id for a in accepted}
            (release,) = await h.te.wait_for_call("release_partitions", timeout_s=DEADLINE_S)
            assert release.args[0] == job.job_id and len(release.args[1]) == 2
            assert (await h.gw.request_job_status()) is JobStatus.FINISHED

    run(test)


def test_a_deposed_leaders_job_master_commits_no_sink() -> None:
    """With high availability the commit first confirms the leadership; a JobManager that no
    longer leads publishes nothing and aborts nothing either: the newer leader's run of the job
    stages its output under the same job id."""
    leading = [True]

    def check() -> None:
        if not leading[0]:
            raise LeadershipLostException("this JobManager no longer leads (session s1)")

    async def test() -> None:
        sink = RecordingSink()
        async with Harness(make_job(1, None, sink), leadership_check=check) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            await h.connect_task_manager(1)
            (task,) = await h.submitted(1)
            leading[0] = False  # a newer leader took over while the task ran
            await h.finish(task, {0: "tmp-0"})
            result = await h.result()
            assert result.application_status == "FAILED"
            assert "no longer leads" in result.failure.error.message
            assert [c[0] for c in sink.calls] == ["prepare"], sink.calls

    run(test)


def test_task_failure_fails_job_with_root_cause_and_cancels_the_others() -> None:
    async def test() -> None:
        sink = RecordingSink()
        async with Harness(make_job(2, None, sink)) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            await h.connect_task_manager(2)
            a0, a1 = await h.submitted(2)
            await h.report(a1, ExecutionState.RUNNING)
            await h.report(a0, ExecutionState.FAILED, error=SerializedError("ValueError", "bad record 17"))
            (cancel,) = await h.te.wait_for_call("cancel_task", timeout_s=DEADLINE_S)
            assert cancel.args[0] == a1.attempt_id
            assert (await h.gw.request_job_status()) is JobStatus.FAILING
            await h.report(a1, ExecutionState.CANCELED)
            result = await h.result()
            assert result.application_status == "FAILED"
            assert result.failure is not None
            assert result.failure.error.message == "bad record 17"
            assert result.failure.task_name == "src (1/2)#0"
            assert result.failure.location == "tm-1"
            assert sink.calls[-1][0] == "abort"
            archived = await h.gw.request_job()
            assert archived.state is JobStatus.FAILED and archived.failure == result.failure

    run(test)


def test_cancel_job() -> None:
    async def test() -> None:
        sink = RecordingSink()
        async with Harness(make_job(1, 1, sink)) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            await h.connect_task_manager(1)
            (a0,) = await h.submitted(1)
            await h.report(a0, ExecutionState.RUNNING)
            await h.gw.cancel()
            (cancel,) = await h.te.wait_for_call("cancel_task", timeout_s=DEADLINE_S)
            assert cancel.args[0] == a0.attempt_id
            assert (await h.gw.request_job_status()) is JobStatus.CANCELLING
            await h.report(a0, ExecutionState.CANCELED)
            result = await h.result()
            assert result.application_status == "CANCELED"
            assert [c[0] for c in sink.calls] == ["prepare", "abort"]
            await h.gw.cancel()  # idempotent on a terminal job

    run(test)


def test_slot_request_timeout_fails_the_job() -> None:
    async def test() -> None:
        clock = ManualClock()
        async with Harness(make_job(3, None), {"slot.request.timeout": "2 s"}, clock) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            archived = await h.gw.request_job()
            assert archived.pending_slot_requests == 3
            clock.advance(1.9)
            assert (await h.gw.request_job_status()) is JobStatus.RUNNING
            clock.advance(0.2)
            result = await h.result()
            assert result.application_status == "FAILED"
            assert result.failure is not None
            assert result.failure.error.message.startswith(
                "Could not acquire the minimum required resources: the job needs 1 slot(s) at once, "
                "the cluster offered 0 slot(s) within slot.request.timeout=2s"
            )

    run(test)


def test_region_bigger_than_the_cluster_times_out_with_counts() -> None:
    async def test() -> None:
        clock = ManualClock()
        # one pipelined region of 2 x 3 subtasks sharing 3 slots; the TaskManager offers 2
        job = make_job(3, 3)
        vertices = tuple(
            JobVertex(v.id, v.name, v.parallelism, v.max_parallelism, v.invokable_class,
                      inputs=v.inputs,
                      results=tuple(IntermediateDataSet(d.id, d.producer, ResultPartitionType.PIPELINED_BOUNDED,
                                                        d.consumer, d.ship_strategy) for d in v.results))
            for v in job.vertices
        )
        job = JobGraph(job.job_id, "streaming", JobType.STREAMING, vertices)
        async with Harness(job, {"slot.request.timeout": "2 s"}, clock) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            assert len(await h.connect_task_manager(2)) == 2
            clock.advance(2.5)
            result = await h.result()
            assert result.failure is not None
            assert result.failure.error.message.startswith(
                "Could not acquire the minimum required resources: the job needs 3 slot(s) at once, "
                "the cluster offered 2 slot(s) within slot.request.timeout=2s"
            )
            assert h.te.calls_to("submit_task") == []

    run(test)


def test_sink_prepare_failure_fails_the_job() -> None:
    async def test() -> None:
        sink = RecordingSink(fail_prepare=True)
        async with Harness(make_job(1, None, sink)) as h:
            result = await h.result()
            assert result.application_status == "FAILED"
            assert result.failure is not None
            assert result.failure.error.class_name == "FileExistsError"
            assert "/out already holds data" in result.failure.error.message
            assert h.te.calls_to("submit_task") == []
            assert h.terminal[0][0].state is JobStatus.FAILED

    run(test)


def test_task_manager_heartbeat_timeout_fails_its_tasks() -> None:
    async def test() -> None:
        clock = ManualClock()
        conf = {"heartbeat.interval": "1 s", "heartbeat.timeout": "5 s"}
        async with Harness(make_job(1, None), conf, clock) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            await h.connect_task_manager(1)
            (a0,) = await h.submitted(1)
            await h.report(a0, ExecutionState.RUNNING)
            for i in range(8):  # 8 s > heartbeat.timeout, but the TaskExecutor answers
                clock.advance(1.0)
                await h.te.wait_for_call("heartbeat_from_job_manager", i + 1, timeout_s=DEADLINE_S)
                await h.gw.heartbeat_from_task_manager(TM)
            await poll(lambda: h.jm.clock.pending_timers() > 0, "next heartbeat tick")  # type: ignore[attr-defined]
            assert (await h.gw.request_job_status()) is JobStatus.RUNNING
            clock.advance(6.0)  # silence
            result = await h.result()
            assert result.failure is not None
            assert "heartbeat of TaskManager with id tm-1 timed out" in result.failure.error.message

    run(test)


def test_a_task_manager_whose_heartbeat_rpcs_find_it_unreachable_is_lost_before_the_timeout() -> None:
    """Flink's ``heartbeat.rpc-failure-threshold``: a killed TaskManager refuses connections, so
    two heartbeat RPCs in a row fail with RecipientUnreachable and its tasks fail after 2
    intervals, not after ``heartbeat.timeout``; a reply resets the count, a timed-out RPC (a
    paused peer) neither counts nor resets (Flink's ``HeartbeatManagerSenderImpl``)."""
    from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RpcTimeout

    async def test() -> None:
        clock = ManualClock()
        conf = {"heartbeat.interval": "1 s", "heartbeat.timeout": "50 s"}
        async with Harness(make_job(1, None), conf, clock) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            await h.connect_task_manager(1)
            (a0,) = await h.submitted(1)
            await h.report(a0, ExecutionState.RUNNING)
            outcomes: list[Exception | None] = [
                RecipientUnreachable("refused"), None, RecipientUnreachable("refused"),
                RpcTimeout("slow"), RecipientUnreachable("refused")]

            def heartbeat(*_: Any) -> None:
                outcome = outcomes.pop(0)
                if outcome is not None:
                    raise outcome

            h.te.handlers["heartbeat_from_job_manager"] = heartbeat
            for i in range(4):  # never two unreachable in a row yet
                clock.advance(1.0)
                await h.te.wait_for_call("heartbeat_from_job_manager", i + 1, timeout_s=DEADLINE_S)
                await poll(lambda n=i: len(outcomes) == 4 - n, "heartbeat answered")
            await poll(lambda: h.jm.clock.pending_timers() > 0, "next heartbeat tick")  # type: ignore[attr-defined]
            assert (await h.gw.request_job_status()) is JobStatus.RUNNING
            clock.advance(1.0)  # the second unreachable in a row
            result = await h.result()
            assert result.failure is not None
            assert "TaskManager with id tm-1 is unreachable" in result.failure.error.message
            assert "heartbeat.rpc-failure-threshold" in result.failure.error.message

    run(test)


def test_unknown_attempts_and_unregistered_offers_are_ignored() -> None:
    async def test() -> None:
        async with Harness(make_job(1, None)) as h:
            await h.rm.wait_for_call("declare_required_resources", timeout_s=DEADLINE_S)
            assert await h.gw.offer_slots(TM, (SlotOffer(AllocationID.generate(), 0),)) == ()
            await h.connect_task_manager(1)
            (a0,) = await h.submitted(1)
            other = TaskDeploymentDescriptor(
                a0.job_id, a0.job_name, ExecutionAttemptID.generate(a0.attempt_id.execution_vertex_id, 5),
                a0.allocation_id, a0.vertex_name, 1, 128, "tests:Noop",
            )
            await h.report(other, ExecutionState.FAILED, error=SerializedError("E", "old"))
            assert (await h.gw.request_job_status()) is JobStatus.RUNNING
            await h.finish(a0)
            assert (await h.result()).is_success

    run(test)
