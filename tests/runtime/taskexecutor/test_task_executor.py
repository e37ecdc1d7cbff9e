"""TaskExecutor against testing ResourceManager and JobMaster endpoints (STYLE layer 2)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from flintlock.config.configuration import Configuration
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.deployment import PartitionLocation, ResultPartitionDeploymentDescriptor
from flintlock.runtime.ids import (
    AllocationID,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobID,
    ResourceID,
    SlotID,
)
from flintlock.runtime.jobgraph.types import ExecutionState, ResultPartitionType, ShipStrategy
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse, ResourceManagerGateway
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.exceptions import RpcTimeout
from flintlock.runtime.rpc.messages import ACK
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.runtime.taskexecutor.exceptions import (
    SlotAllocationException,
    TaskSubmissionException,
)
from flintlock.runtime.taskexecutor.gateway import SlotOffer, TaskExecutorGateway
from flintlock.runtime.taskexecutor.slot.task_slot_table import TaskSlotState
from flintlock.runtime.taskexecutor.task_executor import TaskExecutor
from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState, TaskResult
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.invokables import (
    LATCH_KEY,
    BlockingInvokable,
    NoOpInvokable,
    blocking_latch_scope,
    make_tdd,
)
from flintlock.testing.waiting import wait_until

E = ExecutionState
RM_ID = ResourceID("rm")
JM_ID = ResourceID("jm")
CONF = {
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "5 s",
    "taskmanager.registration.timeout": "10 s",
    "rpc.ask-timeout": "2 s",
}


@dataclass
class Env:
    rpc: InProcRpcService
    clock: ManualClock
    rm: TestingEndpoint
    jm: TestingEndpoint
    te: TaskExecutor
    gw: TaskExecutorGateway

    def reported(self) -> list[TaskExecutionState]:
        return [c.args[0] for c in self.jm.calls_to("update_task_execution_state")]

    def describe(self) -> str:
        return f"te={self.te.debug_state()} jm={[c.method for c in self.jm.calls]}"

    async def drain(self) -> None:
        await self.te.run_in_mailbox(lambda: None)

    async def active_slot(self, job_id: JobID, index: int = 0) -> AllocationID:
        allocation = AllocationID.generate()
        version = await self.gw.request_slot(SlotID(self.te.resource_id, index), job_id,
                                             allocation, self.jm.address)
        assert version == self.te.slot_table.version > 0  # the answer names the table version
        await wait_until(
            lambda: self.te.slot_table.slot(index).state is TaskSlotState.ACTIVE,
            describe=self.describe,
        )
        return allocation


def _run(body: Callable[[Env], Awaitable[None]], *, start_rm: bool = True,
         **te_kwargs: Any) -> None:
    async def main() -> None:
        rpc = InProcRpcService()
        clock = ManualClock()
        rm = TestingEndpoint("resourcemanager", ResourceManagerGateway,
                             register_task_executor=lambda reg: RegistrationResponse(True, RM_ID))
        jm = TestingEndpoint("jobmaster", JobMasterGateway,
                             register_task_manager=lambda rid, addr: RegistrationResponse(True, JM_ID),
                             offer_slots=lambda rid, offers: offers)
        rpc.register(rm)
        rpc.register(jm)
        if start_rm:
            await rm.start()
        await jm.start()
        te = TaskExecutor(rpc, Configuration(CONF), rm.address,
                          {"shuffle_dir": te_kwargs.pop("shuffle_dir", "")},
                          resource_id=ResourceID("te-1"), clock=clock,
                          number_of_slots=te_kwargs.pop("number_of_slots", 2))
        await te.start()
        gw = await rpc.connect(te.address, TaskExecutorGateway, fencing_token=DEFAULT_LEADER_ID)
        env = Env(rpc, clock, rm, jm, te, gw)
        try:
            await body(env)
        finally:
            await te.stop()
            await jm.stop()
            await rm.stop()
        assert not [t for t in threading.enumerate() if t.name.startswith("Task-")]

    asyncio.run(asyncio.wait_for(main(), 20))


def test_registers_at_the_resource_manager_and_reports_its_slots() -> None:
    async def body(env: Env) -> None:
        [reg] = await env.rm.wait_for_call("register_task_executor")
        registration = reg.args[0]
        assert registration.resource_id == ResourceID("te-1")
        assert registration.address == env.te.address and registration.number_of_slots == 2
        [report] = await env.rm.wait_for_call("send_slot_report")
        assert report.args[0] == ResourceID("te-1")
        assert report.args[1].free_slots() == 2
        assert env.te.is_registered

    _run(body)


def test_registration_retries_until_the_resource_manager_appears() -> None:
    async def body(env: Env) -> None:
        await env.drain()
        assert not env.te.is_registered
        env.clock.advance(0.1)  # first retry after 100 ms: still nobody there
        await env.drain()
        await env.rm.start()
        env.clock.advance(0.2)  # back-off doubled
        await wait_until(lambda: env.te.is_registered, describe=env.describe)
        assert len(env.rm.calls_to("register_task_executor")) == 1
        await env.rm.wait_for_call("send_slot_report")

    _run(body, start_rm=False)


def test_registration_gives_up_after_the_registration_timeout() -> None:
    async def body(env: Env) -> None:
        for _ in range(12):
            env.clock.advance(1.0)
            await env.drain()
        await wait_until(lambda: env.te.registration_error is not None, describe=env.describe)
        assert "taskmanager.registration.timeout" in str(env.te.registration_error)
        pending = env.clock.pending_timers()
        env.clock.advance(60.0)
        await env.drain()
        assert not env.te.is_registered and env.clock.pending_timers() <= pending

    _run(body, start_rm=False)


def test_request_slot_offers_it_and_accepted_slot_becomes_active() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job, index=1)
        [reg] = env.jm.calls_to("register_task_manager")
        assert reg.args == (ResourceID("te-1"), env.te.address)
        [offer] = env.jm.calls_to("offer_slots")
        assert offer.args[1] == (SlotOffer(allocation, 1),)
        # idempotent for the same allocation (same version); another allocation of a taken slot
        # fails
        version = env.te.slot_table.version
        assert await env.gw.request_slot(SlotID(env.te.resource_id, 1), job, allocation,
                                         env.jm.address) == version
        with pytest.raises(SlotAllocationException):
            await env.gw.request_slot(SlotID(env.te.resource_id, 1), job,
                                      AllocationID.generate(), env.jm.address)
        assert env.te.slot_table.slot(0).state is TaskSlotState.FREE

    _run(body)


def test_rejected_offer_frees_the_slot_and_tells_the_resource_manager() -> None:
    async def body(env: Env) -> None:
        env.jm.handlers["offer_slots"] = lambda rid, offers: ()
        await env.rm.wait_for_call("send_slot_report")
        allocation = AllocationID.generate()
        await env.gw.request_slot(SlotID(env.te.resource_id, 0), JobID.generate(), allocation,
                                  env.jm.address)
        [call] = await env.rm.wait_for_call("notify_slot_available")
        # the slot table's version after allocating (1) and freeing (2)
        assert call.args == (ResourceID("te-1"), SlotID(ResourceID("te-1"), 0), allocation, 2)
        assert env.te.slot_table.slot(0).state is TaskSlotState.FREE
        # no slots and no partitions left: the job connection is closed
        await env.jm.wait_for_call("disconnect_task_manager")
        assert env.te.connected_jobs() == []

    _run(body)


def test_submitted_task_reports_its_states_in_order() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job)
        tdd = make_tdd(NoOpInvokable, job_id=job, allocation_id=allocation)
        assert await env.gw.submit_task(tdd) == ACK
        await env.jm.wait_for_call("update_task_execution_state", 3)
        states = env.reported()
        assert [s.state for s in states] == [E.INITIALIZING, E.RUNNING, E.FINISHED]
        assert all(s.attempt_id == tdd.attempt_id and s.task_manager == "te-1" for s in states)
        assert states[-1].result is not None
        await wait_until(lambda: env.te.number_of_running_tasks == 0, describe=env.describe)
        assert env.te.slot_table.slot(0).state is TaskSlotState.ACTIVE

    _run(body)


def test_submit_task_needs_an_active_slot_and_a_job_master() -> None:
    async def body(env: Env) -> None:
        with pytest.raises(TaskSubmissionException, match="no JobMaster connection"):
            await env.gw.submit_task(make_tdd(NoOpInvokable))
        job = JobID.generate()
        await env.active_slot(job)
        with pytest.raises(TaskSubmissionException, match="no slot allocated"):
            await env.gw.submit_task(make_tdd(NoOpInvokable, job_id=job))
        assert env.te.number_of_running_tasks == 0

    _run(body)


def test_a_checkpoint_trigger_names_what_it_cannot_do() -> None:
    async def body(env: Env) -> None:
        attempt = make_tdd(NoOpInvokable).attempt_id
        with pytest.raises(TaskSubmissionException, match="unknown stop mode 'halt'"):
            await env.gw.trigger_checkpoint(attempt, 3, 0, "/chk/chk-3", "halt")
        with pytest.raises(TaskSubmissionException, match="the task is not running here"):
            await env.gw.trigger_checkpoint(attempt, 3, 0, "/chk/chk-3", "suspend")

    _run(body)


def test_cancel_task_of_a_blocking_task_reports_canceled() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job)
        with blocking_latch_scope("te_cancel") as latch:
            tdd = make_tdd(BlockingInvokable, job_id=job, allocation_id=allocation,
                           job_configuration={LATCH_KEY: "te_cancel"})
            await env.gw.submit_task(tdd)
            assert await asyncio.to_thread(latch.started.acquire, True, 5)
            assert env.te.number_of_running_tasks == 1
            assert await env.gw.cancel_task(tdd.attempt_id) == ACK
            await env.jm.wait_for_call("update_task_execution_state", 3)
        assert [s.state for s in env.reported()] == [E.INITIALIZING, E.RUNNING, E.CANCELED]
        await wait_until(lambda: env.te.number_of_running_tasks == 0, describe=env.describe)
        assert await env.gw.cancel_task(tdd.attempt_id) == ACK  # unknown now: still acknowledged

    _run(body)


def test_a_cancel_that_arrives_before_the_task_keeps_it_from_starting() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job)
        with blocking_latch_scope("te_early_cancel") as latch:
            tdd = make_tdd(BlockingInvokable, job_id=job, allocation_id=allocation,
                           job_configuration={LATCH_KEY: "te_early_cancel"})
            assert await env.gw.cancel_task(tdd.attempt_id) == ACK  # overtook the submission
            await env.gw.submit_task(tdd)
            await env.jm.wait_for_call("update_task_execution_state", 1)
            assert [s.state for s in env.reported()] == [E.CANCELED]
            await wait_until(lambda: env.te.number_of_running_tasks == 0, describe=env.describe)
            assert latch.started_count == 0  # the invokable never ran

    _run(body)


def test_free_slot_fails_its_task_then_tells_the_resource_manager() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job)
        tdd = make_tdd(BlockingInvokable, job_id=job, allocation_id=allocation)
        await env.gw.submit_task(tdd)
        await env.jm.wait_for_call("update_task_execution_state", 2)  # INITIALIZING, RUNNING
        assert await env.gw.free_slot(allocation, "no longer needed") == ACK
        [freed] = await env.rm.wait_for_call("notify_slot_available")
        assert freed.args[2] == allocation
        await env.jm.wait_for_call("update_task_execution_state", 3)
        final = env.reported()[-1]
        assert final.state is E.FAILED and "no longer needed" in final.error.message  # type: ignore[union-attr]
        assert env.te.slot_table.slot(0).state is TaskSlotState.FREE
        await env.jm.wait_for_call("disconnect_task_manager")

    _run(body)


def test_state_update_is_retried_after_a_timeout() -> None:
    async def body(env: Env) -> None:
        failures = [RpcTimeout("lost")]

        def update(state: TaskExecutionState) -> Any:
            if failures:
                raise failures.pop()
            return ACK

        env.jm.handlers["update_task_execution_state"] = update
        job = JobID.generate()
        allocation = await env.active_slot(job)
        await env.gw.submit_task(make_tdd(NoOpInvokable, job_id=job, allocation_id=allocation))
        await env.jm.wait_for_call("update_task_execution_state", 4)
        assert [s.state for s in env.reported()] == [E.INITIALIZING, E.INITIALIZING, E.RUNNING,
                                                      E.FINISHED]

    _run(body)


class _PartitionWriter:
    """Writes one file into ``<shuffle_dir>/<attempt>`` and reports it as its partition."""

    def __init__(self, env: RuntimeEnvironment) -> None:
        self.env = env

    def invoke(self) -> TaskResult:
        tdd = self.env.tdd
        path = os.path.join(self.env.services["shuffle_dir"], str(tdd.attempt_id))
        os.makedirs(path)
        with open(os.path.join(path, "part-0.parquet"), "wb") as f:
            f.write(b"x")
        [produced] = tdd.produced_partitions
        return TaskResult(partitions=(PartitionLocation(
            produced.partition_id, tdd.attempt_id, path, (1,), (1,), "x INT"),))

    def cancel(self) -> None:
        pass


def _produced() -> tuple[ResultPartitionDeploymentDescriptor, ...]:
    return (ResultPartitionDeploymentDescriptor(
        IntermediateResultPartitionID(IntermediateDataSetID.generate(), 0),
        ShipStrategy.FORWARD, ResultPartitionType.BLOCKING, 1),)


def test_release_partitions_deletes_the_recorded_directories(tmp_path: Any) -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job)
        tdd = make_tdd(f"{__name__}:_PartitionWriter", job_id=job, allocation_id=allocation,
                       produced_partitions=_produced())
        await env.gw.submit_task(tdd)
        await env.jm.wait_for_call("update_task_execution_state", 3)
        path = tmp_path / str(tdd.attempt_id)
        assert path.is_dir() and env.te.partition_table.is_tracking(job)
        # the slot is freed, but the job connection stays while partitions are stored
        await env.gw.free_slot(allocation, "done")
        await env.rm.wait_for_call("notify_slot_available")
        assert env.te.connected_jobs() == [job]
        await env.gw.release_partitions(job, (tdd.produced_partitions[0].partition_id,))
        await wait_until(lambda: not path.exists(), describe=env.describe)
        await env.jm.wait_for_call("disconnect_task_manager")
        assert env.te.connected_jobs() == []

    _run(body, shuffle_dir=str(tmp_path))


def test_job_master_heartbeat_timeout_fails_tasks_frees_slots_releases_partitions(
        tmp_path: Any) -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        a0 = await env.active_slot(job, 0)
        a1 = await env.active_slot(job, 1)
        writer = make_tdd(f"{__name__}:_PartitionWriter", job_id=job, allocation_id=a0,
                          produced_partitions=_produced())
        await env.gw.submit_task(writer)
        await env.jm.wait_for_call("update_task_execution_state", 3)
        blocker = make_tdd(BlockingInvokable, job_id=job, allocation_id=a1)
        await env.gw.submit_task(blocker)
        await env.jm.wait_for_call("update_task_execution_state", 5)
        # the JobMaster's heartbeat requests keep the connection alive ...
        # (the ResourceManager's keep its connection alive throughout)
        env.clock.advance(4.0)
        await env.gw.heartbeat_from_job_manager(JM_ID, job)
        await env.gw.heartbeat_from_resource_manager(RM_ID)
        await env.jm.wait_for_call("heartbeat_from_task_manager")
        env.clock.advance(4.0)
        await env.gw.heartbeat_from_resource_manager(RM_ID)
        await env.drain()
        assert env.te.connected_jobs() == [job]
        # ... until they stop
        env.clock.advance(1.5)
        await wait_until(lambda: env.te.slot_table.number_of_free_slots() == 2,
                         describe=env.describe)
        assert env.te.number_of_running_tasks == 0
        await wait_until(lambda: not (tmp_path / str(writer.attempt_id)).exists())
        freed = [c.args[2] for c in await env.rm.wait_for_call("notify_slot_available", 2)]
        assert sorted(map(str, freed)) == sorted([str(a0), str(a1)])
        assert env.te.connected_jobs() == []

    _run(body, shuffle_dir=str(tmp_path))


def test_resource_manager_heartbeats_are_answered_and_their_loss_triggers_reregistration() -> None:
    async def body(env: Env) -> None:
        await env.rm.wait_for_call("send_slot_report")
        await env.gw.heartbeat_from_resource_manager(RM_ID)
        [hb] = await env.rm.wait_for_call("heartbeat_from_task_manager")
        assert hb.args[0] == ResourceID("te-1") and hb.args[1].free_slots() == 2
        env.clock.advance(5.5)
        await env.rm.wait_for_call("register_task_executor", 2)
        await env.rm.wait_for_call("send_slot_report", 2)

    _run(body)


def test_stop_cancels_running_tasks_and_disconnects() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        allocation = await env.active_slot(job)
        await env.gw.submit_task(make_tdd(BlockingInvokable, job_id=job, allocation_id=allocation))
        await env.jm.wait_for_call("update_task_execution_state", 2)
        await env.te.stop()
        assert not [t for t in threading.enumerate() if t.name.startswith("Task-")]
        [disc] = await env.rm.wait_for_call("disconnect_task_manager")
        assert disc.args[0] == ResourceID("te-1")
        await env.jm.wait_for_call("disconnect_task_manager")

    _run(body)


def test_task_submitted_before_the_offer_reply_activates_its_slot() -> None:
    """A JobMaster may deploy as soon as it accepted an offer (Flink tryMarkSlotActive)."""

    async def body(env: Env) -> None:
        reply = asyncio.Event()

        async def offer_slots(rid: ResourceID, offers: tuple[SlotOffer, ...]) -> Any:
            await reply.wait()
            return offers

        env.jm.handlers["offer_slots"] = offer_slots
        job, allocation = JobID.generate(), AllocationID.generate()
        await env.gw.request_slot(SlotID(env.te.resource_id, 0), job, allocation, env.jm.address)
        await env.jm.wait_for_call("offer_slots")
        assert env.te.slot_table.slot(0).state is TaskSlotState.ALLOCATED
        await env.gw.submit_task(make_tdd(NoOpInvokable, job_id=job, allocation_id=allocation))
        assert env.te.slot_table.slot(0).state is TaskSlotState.ACTIVE
        reply.set()
        await env.jm.wait_for_call("update_task_execution_state", 3)
        assert env.reported()[-1].state is E.FINISHED

    _run(body)
