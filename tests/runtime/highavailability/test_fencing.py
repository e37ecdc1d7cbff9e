"""Fencing tokens: a deposed leader's calls are rejected (Flink ``FencedRpcEndpoint``).

Layer 2 (endpoints on the in-process and the gRPC transport) for the token check itself and for
a TaskExecutor that learned of a new leader; layer 3 (MiniCluster with test invokables, no
Spark, the fault-injecting transport) for a JobMaster whose deployment reaches a TaskExecutor
only after another leadership took over: it deploys nothing there.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import pytest

from flintlock.config.configuration import Configuration
from flintlock.runtime.ids import (
    AllocationID,
    JobID,
    JobVertexID,
    ResourceID,
    SlotID,
)
from flintlock.runtime.jobgraph.job_graph import JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse, ResourceManagerGateway
from flintlock.runtime.rpc.endpoint import FencedRpcEndpoint
from flintlock.runtime.rpc.exceptions import FencingTokenMismatch
from flintlock.runtime.rpc.fault_injection import FaultInjectingRpcService
from flintlock.runtime.rpc.grpc_service import GrpcRpcService
from flintlock.runtime.rpc.service import InProcRpcService, oneway
from flintlock.runtime.taskexecutor.gateway import TaskExecutorGateway
from flintlock.runtime.taskexecutor.slot.task_slot_table import TaskSlotState
from flintlock.runtime.taskexecutor.task_executor import TaskExecutor
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.invokables import make_tdd
from flintlock.testing.waiting import wait_until

OLD, NEW = "a" * 32, "b" * 32


class CounterGateway(Protocol):
    async def add(self, n: int) -> int: ...

    @oneway
    async def add_later(self, n: int) -> None: ...

    async def peek(self) -> int: ...


class Counter(FencedRpcEndpoint):
    UNFENCED_METHODS = frozenset({"peek"})

    def __init__(self, token: str) -> None:
        super().__init__("counter", fencing_token=token)
        self.value = 0

    async def add(self, n: int) -> int:
        self.value += n
        return self.value

    async def add_later(self, n: int) -> None:
        self.value += n

    async def peek(self) -> int:
        return self.value


async def _check_fencing(rpc: object, server: object, counter: Counter) -> None:
    leader = await rpc.connect(counter.address, CounterGateway, fencing_token=OLD)  # type: ignore[attr-defined]
    stale = await rpc.connect(counter.address, CounterGateway, fencing_token=NEW)  # type: ignore[attr-defined]
    unfenced = await rpc.connect(counter.address, CounterGateway)  # type: ignore[attr-defined]
    assert await leader.add(2) == 2
    for gateway in (stale, unfenced):
        with pytest.raises(FencingTokenMismatch, match="rejected add"):
            await gateway.add(5)
        await gateway.add_later(7)  # discarded at the target
    await leader.add_later(1)
    await wait_until(lambda: counter.value == 3, describe=lambda: f"value={counter.value}")
    assert await unfenced.peek() == 3  # an unfenced query
    counter.fencing_token = NEW  # another leadership: the old token is the stale one now
    with pytest.raises(FencingTokenMismatch, match=f"token {OLD} is not the leader's {NEW}"):
        await leader.add(1)
    assert await stale.add(1) == 4


def test_a_fenced_endpoint_accepts_only_its_token_in_process() -> None:
    async def main() -> None:
        rpc = InProcRpcService()
        counter = Counter(OLD)
        rpc.register(counter)
        await counter.start()
        try:
            await _check_fencing(rpc, rpc, counter)
        finally:
            await counter.stop()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_the_token_crosses_the_wire_and_the_mismatch_comes_back() -> None:
    async def main() -> None:
        server, client = GrpcRpcService(secret="s"), GrpcRpcService(secret="s")
        await server.start()
        await client.start()
        counter = Counter(OLD)
        server.register(counter)
        await counter.start()
        try:
            await _check_fencing(client, server, counter)
        finally:
            await counter.stop()
            await client.close()
            await server.close()

    asyncio.run(asyncio.wait_for(main(), 20))


def test_a_task_executor_rejects_the_calls_of_a_deposed_leader() -> None:
    """Once leader retrieval announced leadership NEW, calls carrying OLD (the deposed
    ResourceManager's slot requests, its JobMasters' deployments) change nothing."""

    async def main() -> None:
        rpc = InProcRpcService()
        endpoints = [TestingEndpoint(name, ResourceManagerGateway, register_task_executor=lambda r: (
            RegistrationResponse(True, ResourceID("rm")))) for name in ("rm-old", "rm-new")]
        endpoints.append(TestingEndpoint(
            "jobmaster", JobMasterGateway, offer_slots=lambda rid, offers: offers,
            register_task_manager=lambda rid, addr: RegistrationResponse(True, ResourceID("jm"))))
        for endpoint in endpoints:
            rpc.register(endpoint)
            await endpoint.start()
        rm_old, rm_new, jm = endpoints
        te = TaskExecutor(rpc, Configuration({"rpc.ask-timeout": "2 s"}), rm_old.address,
                          {"shuffle_dir": ""}, resource_id=ResourceID("te"), number_of_slots=2,
                          leader_id=OLD)
        await te.start()
        old = await rpc.connect(te.address, TaskExecutorGateway, fencing_token=OLD)
        new = await rpc.connect(te.address, TaskExecutorGateway, fencing_token=NEW)
        try:
            job = JobID.generate()
            assert await old.request_slot(SlotID(te.resource_id, 0), job, AllocationID.generate(),
                                          jm.address) == 1  # the slot table's version
            await wait_until(lambda: te.slot_table.slot(0).state is TaskSlotState.ACTIVE,
                             describe=te.debug_state)
            with pytest.raises(FencingTokenMismatch, match="rejected request_slot"):
                await new.request_slot(SlotID(te.resource_id, 1), job, AllocationID.generate(),
                                       jm.address)
            te.post(te.notify_resource_manager_leader, rm_new.address, NEW)
            await rm_new.wait_for_call("register_task_executor")  # re-registered at the new one
            assert te.slot_table.slot(0).job_id is None  # the old leadership's job is released
            tdd = make_tdd(job_id=job)
            for call in (old.request_slot(SlotID(te.resource_id, 1), job, AllocationID.generate(),
                                          jm.address),
                         old.submit_task(tdd), old.cancel_task(tdd.attempt_id),
                         old.heartbeat_from_job_manager(ResourceID("jm"), job)):
                with pytest.raises(FencingTokenMismatch, match=f"{OLD} is not that of the current"):
                    await call
            assert te.slot_table.slot(1).job_id is None and te.number_of_running_tasks == 0
            assert await new.request_slot(SlotID(te.resource_id, 1), job, AllocationID.generate(),
                                          jm.address) == te.slot_table.version
            assert te.slot_table.slot(1).job_id == job
            assert (await old.request_metrics()).resource_id == "te"  # an unfenced query
        finally:
            await te.stop()
            for endpoint in endpoints:
                await endpoint.stop()

    asyncio.run(asyncio.wait_for(main(), 20))


BLOCKING = "flintlock.testing.invokables:BlockingInvokable"


@gen_mini_cluster(task_managers=1, slots_per_task_manager=1, fault_injection=True,
                  config={"rpc.ask-timeout": "5 s", "restart-strategy.type": "none"})
async def test_a_deployment_that_arrives_after_a_leader_change_is_rejected(
        cluster: MiniCluster) -> None:
    """The fault-injecting transport holds the JobMaster's ``submit_task`` back; meanwhile the
    TaskExecutor learns that leadership NEW took over. The JobMaster of the old leadership then
    deploys nothing: the call is rejected, the task never runs and the job fails with the cause."""
    faulty: FaultInjectingRpcService = cluster.rpc_service
    faulty.delay(1.0, "jobmaster-*", "taskexecutor-*", methods={"submit_task"})
    vertex = JobVertex(JobVertexID.generate(), "blocks", 1, 128, BLOCKING)
    job = JobGraph(JobID.generate(), "fenced", JobType.BATCH, (vertex,), {})
    await cluster.submit_job(job)
    te = cluster.task_executors[0]
    await wait_until(lambda: any(c.method == "submit_task" for c in faulty.intercepted),
                     describe=lambda: str(faulty.intercepted))
    te.post(te.notify_resource_manager_leader, cluster.resource_manager.address, NEW)
    result = await cluster.wait_for_job_result(job.job_id, timeout_s=20)
    assert result.application_status == "FAILED"
    assert result.failure is not None
    assert "rejected submit_task" in result.failure.error.message, result.failure
    assert te.number_of_running_tasks == 0


def test_shared_partitions_of_a_lost_job_master_are_kept_under_high_availability() -> None:
    """A TaskExecutor that lost a JobMaster deletes that job's partitions on its own disk, and
    on shared storage without high availability; under high availability it keeps shared ones
    for the next leader's batch job recovery (which deletes them when the job ends)."""
    from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID

    rpc = InProcRpcService()
    shared = Configuration({"shuffle.storage-dir": "/shared/shuffle"})
    cases = [(shared, OLD, False), (shared, DEFAULT_LEADER_ID, True),
             (Configuration(), OLD, True)]
    for n, (conf, leader, deletes) in enumerate(cases):
        te = TaskExecutor(rpc, conf, "inproc://rm", {"shuffle_dir": "/shared/shuffle"},
                          resource_id=ResourceID(f"te-{n}"), leader_id=leader)
        assert te._owns_partitions_of_lost_jobs() is deletes, (n, leader)
        rpc.unregister(te)
