"""ResourceManager against testing TaskExecutor / JobMaster endpoints (STYLE layer 2)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from flintlock.config.configuration import Configuration
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.resourcemanager.exceptions import ResourceManagerException
from flintlock.runtime.resourcemanager.gateway import (
    RegistrationResponse,
    ResourceManagerGateway,
    ResourceOverview,
    ResourceRequirements,
    TaskExecutorRegistration,
)
from flintlock.runtime.resourcemanager.resource_manager import ResourceManager
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.messages import ACK
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.runtime.taskexecutor.exceptions import SlotAllocationException
from flintlock.runtime.taskexecutor.gateway import SlotReport, SlotStatus, TaskExecutorGateway
from flintlock.runtime.taskexecutor.slot.task_slot_table import TaskSlotState
from flintlock.runtime.taskexecutor.task_executor import TaskExecutor
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.waiting import wait_until

CONF = {"heartbeat.interval": "1 s", "heartbeat.timeout": "5 s", "rpc.ask-timeout": "2 s"}
JM_ADDRESS = "inproc://jobmaster"


@dataclass
class Env:
    rpc: InProcRpcService
    clock: ManualClock
    rm: ResourceManager
    gw: ResourceManagerGateway
    tes: dict[str, TestingEndpoint]
    jm: TestingEndpoint

    async def declare(self, job: JobID, slots: int) -> None:
        """Register the testing JobMaster for ``job`` (once) and declare ``slots``."""
        if job not in self.rm.registered_jobs:
            assert (await self.gw.register_job_master(job, JM_ADDRESS, ResourceID("jm"))).success
        await self.gw.declare_required_resources(ResourceRequirements(job, JM_ADDRESS, slots))

    async def add_te(self, name: str, slots: int, **handlers: Any) -> TestingEndpoint:
        te = TestingEndpoint(name, TaskExecutorGateway, **handlers)
        self.rpc.register(te)
        await te.start()
        self.tes[name] = te
        rid = ResourceID(name)
        response = await self.gw.register_task_executor(
            TaskExecutorRegistration(te.address, rid, slots))
        assert response.success and response.resource_id == self.rm.resource_id
        await self.gw.send_slot_report(rid, _free_report(rid, slots))
        return te

    async def overview(self) -> ResourceOverview:
        return await self.gw.request_resource_overview()

    async def drain(self) -> None:
        await self.rm.run_in_mailbox(lambda: None)


def _free_report(rid: ResourceID, slots: int) -> SlotReport:
    return SlotReport(tuple(SlotStatus(SlotID(rid, i)) for i in range(slots)))


def _run(body: Callable[[Env], Awaitable[None]]) -> None:
    async def main() -> None:
        rpc = InProcRpcService()
        clock = ManualClock()
        rm = ResourceManager(rpc, Configuration(CONF), clock=clock, validate=True)
        await rm.start()
        jm = TestingEndpoint("jobmaster", JobMasterGateway)
        rpc.register(jm)
        await jm.start()
        gw = await rpc.connect(rm.address, ResourceManagerGateway, fencing_token=DEFAULT_LEADER_ID)
        env = Env(rpc, clock, rm, gw, {}, jm)
        try:
            await body(env)
            rm.slot_manager.tracker.validate()
        finally:
            await rm.stop()
            await jm.stop()
            for te in env.tes.values():
                await te.stop()

    asyncio.run(asyncio.wait_for(main(), 20))


def test_registration_and_overview_counts() -> None:
    async def body(env: Env) -> None:
        await env.add_te("te-1", 2)
        await env.add_te("te-2", 3)
        assert await env.overview() == ResourceOverview(2, 5, 5)
        infos = {str(i.resource_id): i for i in await env.gw.request_task_manager_infos()}
        assert infos["te-2"].number_of_slots == 3 and infos["te-2"].free_slots == 3
        assert infos["te-1"].address == "inproc://te-1"
        assert infos["te-1"].last_heartbeat_ms == env.clock.now_ms()

    _run(body)


def test_overview_counts_the_spark_servers_of_the_task_managers() -> None:
    async def body(env: Env) -> None:
        async def register(name: str, spark: dict[str, str]) -> None:
            te = TestingEndpoint(name, TaskExecutorGateway)
            env.rpc.register(te)
            await te.start()
            env.tes[name] = te
            assert (await env.gw.register_task_executor(TaskExecutorRegistration(
                te.address, ResourceID(name), 1, spark=spark, cpu_cores=2.0))).success

        assert (await env.overview()).spark_servers == 0  # nobody registered: unknown
        await register("te-1", {"master": "local[1]"})  # a process of its own: its own server
        await register("te-2", {"master": "local[2]"})
        assert (await env.overview()).spark_servers == 2
        # two TaskManagers of one process (a MiniCluster) name the server they share
        await register("te-3", {"master": "local[2]", "server": "host:42"})
        await register("te-4", {"master": "local[2]", "server": "host:42"})
        assert (await env.overview()).spark_servers == 3
        # TaskManagers on one remote Spark share its server (driver)
        await register("te-5", {"master": "sc://spark:15002"})
        await register("te-6", {"master": "sc://spark:15002"})
        assert (await env.overview()).spark_servers == 4
        # a TaskManager whose Spark is unknown (a test's shared session): no count at all
        await register("te-7", {"master": "shared"})
        assert (await env.overview()).spark_servers == 0

    _run(body)


def test_declared_requirements_are_spread_over_task_executors() -> None:
    async def body(env: Env) -> None:
        te1 = await env.add_te("te-1", 2)
        te2 = await env.add_te("te-2", 2)
        job = JobID.generate()
        await env.declare(job, 2)
        [c1] = await te1.wait_for_call("request_slot")
        [c2] = await te2.wait_for_call("request_slot")
        assert c1.args[0] == SlotID(ResourceID("te-1"), 0) and c1.args[1] == job
        assert c2.args[0] == SlotID(ResourceID("te-2"), 0) and c2.args[3] == JM_ADDRESS
        await wait_until(lambda: env.rm.slot_manager.tracker.acquired_slots(job) == 2)
        assert (await env.overview()).number_of_free_slots == 2
        # a lower requirement frees nothing; the TaskExecutor frees and notifies
        await env.declare(job, 1)
        assert (await env.overview()).number_of_free_slots == 2
        await env.gw.notify_slot_available(ResourceID("te-1"), c1.args[0], c1.args[2])
        await env.drain()
        assert (await env.overview()).number_of_free_slots == 3
        env.clock.advance(0.05)
        await env.drain()
        assert len(te1.calls_to("request_slot")) == 1  # not re-requested: requirement is met


def test_slot_freed_below_the_requirement_is_requested_again_after_a_delay() -> None:
    async def body(env: Env) -> None:
        te = await env.add_te("te-1", 1)
        job = JobID.generate()
        await env.declare(job, 1)
        [c1] = await te.wait_for_call("request_slot")
        await env.gw.notify_slot_available(ResourceID("te-1"), c1.args[0], c1.args[2])
        await env.drain()
        assert len(te.calls_to("request_slot")) == 1  # not at once: no hot loop
        env.clock.advance(0.05)
        calls = await te.wait_for_call("request_slot", 2)
        assert calls[1].args[1] == job and calls[1].args[2] != c1.args[2]

    _run(body)


def test_declaration_of_an_unregistered_job_is_rejected() -> None:
    async def body(env: Env) -> None:
        await env.add_te("te-1", 1)
        with pytest.raises(ResourceManagerException, match="no registered JobMaster"):
            await env.gw.declare_required_resources(
                ResourceRequirements(JobID.generate(), JM_ADDRESS, 1))
        assert (await env.overview()).number_of_free_slots == 1

    _run(body)


def test_failed_slot_request_is_retried_after_a_back_off() -> None:
    async def body(env: Env) -> None:
        failures = [SlotAllocationException("busy")]

        def request_slot(*args: Any) -> Any:
            if failures:
                raise failures.pop()
            return None

        te = await env.add_te("te-1", 1, request_slot=request_slot)
        job = JobID.generate()
        await env.declare(job, 1)
        [first] = await te.wait_for_call("request_slot")
        await wait_until(lambda: env.rm.slot_manager.tracker.number_of_free_slots() == 1)
        assert len(te.calls_to("request_slot")) == 1  # no retry before the back-off
        env.clock.advance(0.05)
        calls = await te.wait_for_call("request_slot", 2)
        assert calls[1].args[0] == first.args[0] and calls[1].args[2] != first.args[2]
        slot = env.rm.slot_manager.tracker.slot(first.args[0])
        assert slot is not None
        await wait_until(lambda: slot.state.value == "ALLOCATED", describe=lambda: slot.story)
        assert slot.allocation_id == calls[1].args[2]

    _run(body)


def test_task_executor_heartbeat_timeout_removes_its_slots() -> None:
    async def body(env: Env) -> None:
        te1 = await env.add_te("te-1", 2)
        await env.add_te("te-2", 1)
        rid2 = ResourceID("te-2")
        for _ in range(4):  # te-2 answers heartbeat requests, te-1 stays silent
            env.clock.advance(1.0)
            await env.gw.heartbeat_from_task_manager(rid2, _free_report(rid2, 1))
            await env.drain()
        assert len(te1.calls_to("heartbeat_from_resource_manager")) >= 3
        env.clock.advance(1.5)
        await wait_until(lambda: env.rm.registered_task_executors == [rid2],
                         describe=env.rm.debug_state)
        assert await env.overview() == ResourceOverview(1, 1, 1)
        await te1.wait_for_call("disconnect_resource_manager")

    _run(body)


def test_heartbeat_slot_report_reconciles_and_reregistration_replaces() -> None:
    async def body(env: Env) -> None:
        await env.add_te("te-1", 2)
        rid = ResourceID("te-1")
        job, alloc = JobID.generate(), AllocationID.generate()
        report = SlotReport((SlotStatus(SlotID(rid, 0), alloc, job), SlotStatus(SlotID(rid, 1))))
        await env.gw.heartbeat_from_task_manager(rid, report)
        await env.drain()
        assert (await env.overview()).number_of_free_slots == 1
        # re-registration of the same ResourceID (e.g. after a restart) starts from scratch
        te = env.tes["te-1"]
        assert (await env.gw.register_task_executor(
            TaskExecutorRegistration(te.address, rid, 2))).success
        assert await env.overview() == ResourceOverview(1, 0, 0)  # until its slot report
        await env.gw.send_slot_report(rid, _free_report(rid, 2))
        assert await env.overview() == ResourceOverview(1, 2, 2)
        await env.gw.disconnect_task_manager(rid, "shutting down")
        await env.drain()
        assert await env.overview() == ResourceOverview(0, 0, 0)

    _run(body)


def test_job_master_registration_heartbeats_and_disconnect() -> None:
    async def body(env: Env) -> None:
        te = await env.add_te("te-1", 2)
        job, jm_rid = JobID.generate(), ResourceID("jm-1")
        response = await env.gw.register_job_master(job, env.jm.address, jm_rid)
        assert response == RegistrationResponse(True, env.rm.resource_id)
        await env.gw.declare_required_resources(ResourceRequirements(job, JM_ADDRESS, 1))
        env.clock.advance(1.0)
        await env.jm.wait_for_call("heartbeat_from_resource_manager")
        await te.wait_for_call("request_slot")
        await env.gw.disconnect_job_manager(job, "finished")
        await env.drain()
        assert env.rm.registered_jobs == [] and env.rm.slot_manager.tracker.jobs() == []
        # a late declaration of the disconnected job is refused
        with pytest.raises(ResourceManagerException):
            await env.gw.declare_required_resources(ResourceRequirements(job, JM_ADDRESS, 2))


def test_job_master_heartbeat_timeout_drops_its_requirements() -> None:
    async def body(env: Env) -> None:
        te = await env.add_te("te-1", 2)
        job = JobID.generate()
        await env.declare(job, 1)
        await te.wait_for_call("request_slot")
        env.clock.advance(5.5)  # the testing JobMaster never answers heartbeat requests
        await wait_until(lambda: env.rm.registered_jobs == [], describe=env.rm.debug_state)
        assert env.rm.slot_manager.tracker.jobs() == []

    _run(body)


def test_real_task_executor_gets_its_slot_offered_to_the_job_master() -> None:
    """ResourceManager + real TaskExecutor + testing JobMaster: the FLIP-138 slot flow."""

    async def body(env: Env) -> None:
        jm = env.jm
        jm.handlers["register_task_manager"] = \
            lambda rid, addr: RegistrationResponse(True, ResourceID("jm"))
        jm.handlers["offer_slots"] = lambda rid, offers: offers
        te = TaskExecutor(env.rpc, Configuration(CONF), env.rm.address, {},
                          resource_id=ResourceID("te-real"), number_of_slots=2, clock=env.clock)
        await te.start()
        try:
            await wait_until(lambda: env.rm.slot_manager.tracker.number_of_free_slots() == 2,
                             describe=env.rm.debug_state)
            job = JobID.generate()
            await env.declare(job, 2)
            [offer] = await jm.wait_for_call("offer_slots")
            assert len(offer.args[1]) + len(jm.calls_to("offer_slots")) >= 2
            await wait_until(lambda: all(s.state is TaskSlotState.ACTIVE
                                         for s in te.slot_table.slots()),
                             describe=te.debug_state)
            assert (await env.overview()).number_of_free_slots == 0
        finally:
            await te.stop()
        assert env.rm.registered_task_executors == []

    _run(body)


def test_blocked_nodes_get_no_slots_until_the_block_runs_out() -> None:
    """A JobMaster's speculative execution blocks a slow TaskManager: no job gets its free slots
    for the given time, /overview counts it, and a later block of the same node extends it."""
    async def body(env: Env) -> None:
        te1 = await env.add_te("te-1", 2)
        await env.add_te("te-2", 1)
        te1_id = ResourceID("te-1")
        # (times under heartbeat.timeout: the testing TaskExecutors do not answer heartbeats)
        assert await env.gw.notify_new_blocked_nodes((te1_id,), 2.0, "slow subtask") == ACK
        assert await env.overview() == ResourceOverview(
            2, 3, 3, number_of_blocked_task_managers=1, number_of_free_and_blocked_slots=2)
        job = JobID.generate()
        await env.declare(job, 2)
        await env.tes["te-2"].wait_for_call("request_slot")
        await env.drain()
        assert te1.calls_to("request_slot") == []
        env.clock.advance(1.2)
        await env.gw.notify_new_blocked_nodes((te1_id,), 2.0, "still slow")  # until 3.2 s
        env.clock.advance(1.0)  # past the first block's end: the second still holds
        await env.drain()
        assert te1.calls_to("request_slot") == []
        env.clock.advance(1.1)
        [call] = await te1.wait_for_call("request_slot")
        assert call.args[1] == job
        assert (await env.overview()).number_of_blocked_task_managers == 0

    _run(body)
