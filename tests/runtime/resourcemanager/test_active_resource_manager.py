"""ActiveResourceManager with a recording driver and testing TaskExecutors (STYLE layer 2)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.ids import JobID, ResourceID, SlotID
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.resourcemanager.active.active_resource_manager import (
    ActiveResourceManager,
    worker_settings,
)
from flintlock.runtime.resourcemanager.active.worker_tracker import (
    WorkerResourceSpec,
    WorkerState,
)
from flintlock.runtime.resourcemanager.gateway import (
    ResourceManagerGateway,
    ResourceRequirements,
    TaskExecutorRegistration,
)
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.runtime.taskexecutor.gateway import SlotReport, SlotStatus, TaskExecutorGateway
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.waiting import wait_until

CONF = {"heartbeat.interval": "1 s", "heartbeat.timeout": "50 s", "rpc.ask-timeout": "2 s",
        "taskmanager.numberOfTaskSlots": "2", "taskmanager.cpu.cores": "1",
        "resourcemanager.taskmanager-timeout": "10 s"}
JM_ADDRESS = "inproc://jobmaster"


@dataclass
class RecordingDriver:
    """A ResourceManagerDriver that records what it is asked; ``fail_starts`` makes the next
    requests raise."""

    requested: list[tuple[ResourceID, WorkerResourceSpec]] = field(default_factory=list)
    released: list[ResourceID] = field(default_factory=list)
    fail_starts: list[str] = field(default_factory=list)
    handler: Any = None
    address: tuple[str, int] | None = None
    terminated: bool = False

    async def initialize(self, handler: Any, host: str, port: int) -> None:
        self.handler, self.address = handler, (host, port)

    async def request_resource(self, resource_id: ResourceID, spec: WorkerResourceSpec) -> None:
        self.requested.append((resource_id, spec))
        if self.fail_starts:
            raise FileNotFoundError(self.fail_starts.pop(0))

    async def release_resource(self, resource_id: ResourceID) -> None:
        self.released.append(resource_id)

    async def terminate(self) -> None:
        self.terminated = True

    def describe(self, resource_id: ResourceID) -> dict[str, str]:
        return {}


@dataclass
class Env:
    rpc: InProcRpcService
    clock: ManualClock
    rm: ActiveResourceManager
    gw: ResourceManagerGateway
    driver: RecordingDriver
    jm: TestingEndpoint
    tes: dict[ResourceID, TestingEndpoint] = field(default_factory=dict)

    async def declare(self, job: JobID, slots: int) -> None:
        if job not in self.rm.registered_jobs:
            assert (await self.gw.register_job_master(job, JM_ADDRESS, ResourceID("jm"))).success
        await self.gw.declare_required_resources(ResourceRequirements(job, JM_ADDRESS, slots))

    async def launch(self, rid: ResourceID, releasable: bool = True,
                     spark: dict[str, str] | None = None) -> TestingEndpoint:
        """What a started worker does: its TaskExecutor registers with its slots."""
        te = TestingEndpoint(str(rid), TaskExecutorGateway, can_be_released=lambda: releasable)
        self.rpc.register(te)
        await te.start()
        self.tes[rid] = te
        assert (await self.gw.register_task_executor(
            TaskExecutorRegistration(te.address, rid, 2, spark=spark or {}))).success
        await self.gw.send_slot_report(rid, SlotReport(tuple(SlotStatus(SlotID(rid, i)) for i in range(2))))
        return te

    def states(self) -> dict[str, str]:
        return {str(w.resource_id): w.state.value for w in self.rm.workers.workers()}


def _run(body: Callable[[Env], Awaitable[None]], default_max_slots: int | None = None,
         **conf: str) -> None:
    async def main() -> None:
        rpc = InProcRpcService()
        clock = ManualClock()
        driver = RecordingDriver()
        rm = ActiveResourceManager(rpc, Configuration({**CONF, **conf}), driver, "127.0.0.1", 6123,
                                   clock=clock, validate=True, worker_prefix="tm",
                                   default_max_slots=default_max_slots)
        await rm.start()
        jm = TestingEndpoint("jobmaster", JobMasterGateway)
        rpc.register(jm)
        await jm.start()
        gw = await rpc.connect(rm.address, ResourceManagerGateway, fencing_token=DEFAULT_LEADER_ID)
        env = Env(rpc, clock, rm, gw, driver, jm)
        try:
            await body(env)
            rm.workers.validate()
        finally:
            await rm.stop()
            await jm.stop()
            for te in env.tes.values():
                await te.stop()
        assert driver.terminated  # nothing is left behind

    asyncio.run(asyncio.wait_for(main(), 20))


def test_declared_slots_start_workers_whose_slots_go_to_the_job() -> None:
    async def body(env: Env) -> None:
        assert env.driver.address == ("127.0.0.1", 6123)
        job = JobID.generate()
        await env.declare(job, 3)
        await wait_until(lambda: len(env.driver.requested) == 2, describe=env.states)
        overview = await env.gw.request_resource_overview()
        assert overview.number_of_pending_task_managers == 2
        assert [(str(p.resource_id), p.state, p.number_of_slots, p.cpu_cores)
                for p in overview.pending_task_managers] == [("tm-1", "STARTING", 2, 1),
                                                             ("tm-2", "STARTING", 2, 1)]
        assert {p.since_ms for p in overview.pending_task_managers} == {env.clock.now_ms()}
        spec = WorkerResourceSpec(number_of_slots=2, cpu_cores=1)
        assert env.driver.requested == [(ResourceID("tm-1"), spec), (ResourceID("tm-2"), spec)]
        te1 = await env.launch(ResourceID("tm-1"))
        assert [str(p.resource_id) for p in
                (await env.gw.request_resource_overview()).pending_task_managers] == ["tm-2"]
        te2 = await env.launch(ResourceID("tm-2"))
        assert env.states() == {"tm-1": "REGISTERED", "tm-2": "REGISTERED"}
        calls = [c for te in (te1, te2) for c in te.calls_to("request_slot")]
        await wait_until(lambda: len([c for te in (te1, te2) for c in te.calls_to("request_slot")])
                         == 3, describe=lambda: calls)
        assert len(env.driver.requested) == 2  # no more than needed

    _run(body)


def test_idle_workers_are_released_after_the_timeout_unless_they_hold_partitions() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        await env.declare(job, 4)
        await wait_until(lambda: len(env.driver.requested) == 2)
        await env.launch(ResourceID("tm-1"), releasable=True)
        await env.launch(ResourceID("tm-2"), releasable=False)
        await env.gw.disconnect_job_manager(job, "job finished")  # slots freed by the job's end
        for rid in (ResourceID("tm-1"), ResourceID("tm-2")):
            await env.gw.send_slot_report(rid, SlotReport(tuple(
                SlotStatus(SlotID(rid, i)) for i in range(2))))
        env.clock.advance(9.9)
        await env.rm.run_in_mailbox(lambda: None)
        assert env.driver.released == []
        env.clock.advance(0.6)
        await wait_until(lambda: env.driver.released == [ResourceID("tm-1")], describe=env.states)
        assert ResourceID("tm-1") not in env.rm.registered_task_executors  # no new slots on it
        await env.tes[ResourceID("tm-2")].wait_for_call("can_be_released")  # asked, and kept
        await env.rm.run_in_mailbox(lambda: None)
        assert env.states() == {"tm-1": "RELEASING", "tm-2": "REGISTERED"}
        assert [(str(p.resource_id), p.state) for p in (
            await env.gw.request_resource_overview()).pending_task_managers] == [
            ("tm-1", "STOPPING")]
        te1 = env.tes[ResourceID("tm-1")]  # a TaskManager being stopped may not come back
        refused = await env.gw.register_task_executor(
            TaskExecutorRegistration(te1.address, ResourceID("tm-1"), 2))
        assert not refused.success and "being stopped" in refused.reason
        env.driver.handler.on_worker_terminated(ResourceID("tm-1"), "stopped with code 0")
        await wait_until(lambda: env.states() == {"tm-2": "REGISTERED"})

    _run(body)


def test_a_worker_that_dies_is_replaced_and_its_slots_are_gone_at_once() -> None:
    async def body(env: Env) -> None:
        job = JobID.generate()
        await env.declare(job, 2)
        await wait_until(lambda: len(env.driver.requested) == 1)
        await env.launch(ResourceID("tm-1"))
        env.driver.handler.on_worker_terminated(ResourceID("tm-1"), "exited with code 137")
        # its JobMasters learn at once that its tasks are gone
        [lost] = await env.jm.wait_for_call("disconnect_task_manager")
        assert lost.args == (ResourceID("tm-1"), "TaskManager tm-1 ended: exited with code 137")
        await wait_until(lambda: len(env.driver.requested) == 2, describe=env.states)
        assert env.driver.requested[1][0] == ResourceID("tm-2")
        assert env.rm.registered_task_executors == []  # not after heartbeat.timeout
        assert env.rm.workers.failures_in_last_minute(env.clock.now_ms()) == 0

    _run(body)


def test_workers_that_cannot_start_are_retried_with_a_cool_down() -> None:
    async def body(env: Env) -> None:
        env.driver.fail_starts = ["No such file or directory: '/bad/python'"] * 3
        await env.declare(JobID.generate(), 2)
        # 0.5 failures per minute allowed: after the first failure, one start per retry interval
        await wait_until(lambda: len(env.driver.requested) == 2, describe=env.states)
        await wait_until(lambda: "next start in" in env.rm.workers.held_back,
                         describe=lambda: env.rm.workers.held_back)
        await env.rm.run_in_mailbox(lambda: None)
        assert len(env.driver.requested) == 2
        assert "/bad/python" in env.rm.workers.held_back
        # the waiting job is told why (its slot request timeout's error names it)
        [told] = await env.jm.wait_for_call("notify_not_enough_resources")
        assert "start-up failures exceed 0.5/min" in told.args[0] and "/bad/python" in told.args[0]
        env.clock.advance(5.0)
        await wait_until(lambda: len(env.driver.requested) == 3, describe=env.states)
        await wait_until(lambda: env.states() == {}, describe=env.states)  # all three failed
        assert env.rm.workers.failures_in_last_minute(env.clock.now_ms()) == 3
        # told again after the next failed start, with the latest cause (not on every check)
        told = await env.jm.wait_for_call("notify_not_enough_resources", 2)
        assert "tm-3 could not start" in told[1].args[0]
        await env.rm.run_in_mailbox(lambda: None)
        assert len(env.jm.calls_to("notify_not_enough_resources")) == 2

    _run(body, **{"resourcemanager.start-worker.max-failure-rate": "0.5",
                  "resourcemanager.start-worker.retry-interval": "5 s"})


def test_a_worker_registered_in_time_is_not_stopped() -> None:
    async def body(env: Env) -> None:
        await env.declare(JobID.generate(), 2)
        await wait_until(lambda: len(env.driver.requested) == 1)
        env.clock.advance(29.0)
        await env.launch(ResourceID("tm-1"))
        env.clock.advance(5.0)
        await env.rm.run_in_mailbox(lambda: None)
        assert env.states() == {"tm-1": WorkerState.REGISTERED.value}
        assert env.driver.released == []

    _run(body, **{"resourcemanager.taskmanager-registration.timeout": "30 s"})


def test_the_drivers_capacity_caps_the_slots_unless_configured() -> None:
    def max_slots(conf: dict[str, str], default: int | None) -> int | None:
        return worker_settings(Configuration(conf), default).max_slots

    assert max_slots({}, None) is None
    assert max_slots({}, 2) == 2  # TaskManager processes on a 2-core host
    assert max_slots({"taskmanager.numberOfTaskSlots": "4"}, 2) == 4  # at least one worker
    assert max_slots({"slotmanager.number-of-slots.max": "8"}, 2) == 8


def test_the_spark_servers_count_the_workers_it_may_start() -> None:
    """A job submitted before any worker registered is sized for the Spark servers the cluster
    can have: one embedded server per worker within the slot cap, or the one remote server."""
    async def servers(env: Env) -> int:
        return (await env.gw.request_resource_overview()).spark_servers

    async def capped(env: Env) -> None:
        assert await servers(env) == 2  # 5 slots: two workers of 2 slots
        await env.declare(JobID.generate(), 2)
        await wait_until(lambda: len(env.driver.requested) == 1, describe=env.states)
        await env.launch(ResourceID("tm-1"), spark={"master": "local[1]", "server": "h:1"})
        assert await servers(env) == 2  # its own server is one of the two
        await env.launch(ResourceID("user"), spark={"master": "local[1]", "server": "h:2"})
        # a TaskManager a user started adds its own; its 2 slots leave room for one worker
        assert await servers(env) == 2

    _run(capped, default_max_slots=5)

    async def remote(env: Env) -> None:
        assert await servers(env) == 1
        await env.launch(ResourceID("user"), spark={"master": "sc://spark:15002"})
        assert await servers(env) == 1  # the same server

    _run(remote, default_max_slots=8, **{"spark.remote": "sc://spark:15002"})

    async def unbounded(env: Env) -> None:
        assert await servers(env) == 0  # no cap: unknown, no bound

    _run(unbounded)


def test_initial_task_managers_start_with_the_resource_manager() -> None:
    async def body(env: Env) -> None:
        await wait_until(lambda: len(env.driver.requested) == 1, describe=env.states)
        await env.launch(ResourceID("tm-1"))
        await env.declare(JobID.generate(), 2)  # the job gets its slots; nothing more starts
        te = env.tes[ResourceID("tm-1")]
        await wait_until(lambda: len(te.calls_to("request_slot")) == 2, describe=env.states)
        assert len(env.driver.requested) == 1

    _run(body, **{"resourcemanager.initial-task-managers": "1"})
