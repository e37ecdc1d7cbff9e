"""FaultInjectingRpcService: rules between named endpoints, and TaskManager loss on a MiniCluster.

Layer 2 (real endpoints, in-process transport) for the rules; layer 3 (MiniCluster with test
invokables, no Spark) for a TaskExecutor partitioned away from the JobManager: heartbeats time
out, its task restarts on the other TaskManager, and its TM-local result partition is re-produced
unless ``shuffle.storage-dir`` (shared storage) is set.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest

from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import (
    ExecutionState,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)
from flintlock.runtime.minicluster import MiniCluster
from flintlock.runtime.rpc.endpoint import RpcEndpoint, current_endpoint_id
from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RpcTimeout
from flintlock.runtime.rpc.fault_injection import (
    FaultAction,
    FaultInjectingRpcService,
    InterceptedCall,
    endpoint_name,
)
from flintlock.runtime.rpc.service import InProcRpcService, oneway
from flintlock.testing.clusters import gen_mini_cluster
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.invokables import LATCH_KEY, blocking_latch_scope
from flintlock.testing.waiting import wait_until

TIMEOUT_S = 0.2


class EchoGateway(Protocol):
    async def echo(self, value: Any) -> Any: ...

    @oneway
    async def note(self, value: Any) -> None: ...


class Caller(RpcEndpoint):
    """Calls another endpoint from its own mailbox (``run_async``), like components do; connects
    once per address."""

    def __init__(self, endpoint_id: str, rpc: FaultInjectingRpcService) -> None:
        super().__init__(endpoint_id)
        self.rpc = rpc
        self.gateways: dict[str, Any] = {}
        rpc.register(self)

    async def call(self, address: str, method: str, value: Any) -> Any:
        async def go() -> Any:
            if address not in self.gateways:
                self.gateways[address] = await self.rpc.connect(address, EchoGateway)
            return await getattr(self.gateways[address], method)(value)

        future = asyncio.get_running_loop().create_future()

        def done(result: Any, error: BaseException | None) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        await self.run_in_mailbox(lambda: self.run_async(go(), done))
        return await future


@asynccontextmanager
async def two_endpoints() -> AsyncIterator[tuple[FaultInjectingRpcService, Caller, TestingEndpoint]]:
    rpc = FaultInjectingRpcService(InProcRpcService(TIMEOUT_S), TIMEOUT_S)
    target = TestingEndpoint("target", EchoGateway, echo=lambda v: ("echo", v))
    rpc.register(target)
    caller = Caller("caller", rpc)
    await target.start()
    await caller.start()
    try:
        yield rpc, caller, target
    finally:
        await caller.stop()
        await target.stop()
        await rpc.close()


def test_endpoint_names_of_addresses() -> None:
    assert endpoint_name("inproc://jobmaster-abc") == "jobmaster-abc"
    assert endpoint_name("grpc://127.0.0.1:6123/resourcemanager") == "resourcemanager"


def test_the_caller_of_a_call_is_the_endpoint_whose_mailbox_started_it() -> None:
    async def main() -> None:
        async with two_endpoints() as (_rpc, caller, target):
            seen: list[str | None] = []
            target.handlers["echo"] = lambda v: seen.append(current_endpoint_id()) or v
            assert await caller.call(target.address, "echo", 1) == 1
            assert seen == ["target"]  # handlers run in the target's mailbox
            assert current_endpoint_id() is None  # the test itself is no endpoint
            started: list[str | None] = []

            async def probe() -> None:
                started.append(current_endpoint_id())

            await caller.run_in_mailbox(lambda: caller.run_async(probe()))
            await wait_until(lambda: started)
            assert started == ["caller"]  # background work inherits its endpoint

    asyncio.run(main())


def test_drop_loses_oneway_calls_and_times_requests_out_between_the_named_endpoints() -> None:
    async def main() -> None:
        async with two_endpoints() as (rpc, caller, target):
            assert await caller.call(target.address, "echo", 0) == ("echo", 0)  # connected
            rule = rpc.drop("caller", "target")
            started = time.monotonic()
            with pytest.raises(RpcTimeout, match="dropped by fault injection"):
                await caller.call(target.address, "echo", 1)
            assert time.monotonic() - started >= TIMEOUT_S * 0.9
            assert await caller.call(target.address, "note", "lost") is None
            # calls from others (here: the test, no endpoint) are not affected
            direct = await rpc.connect(target.address, EchoGateway)
            assert await direct.echo(2) == ("echo", 2)
            rpc.remove(rule)
            assert await caller.call(target.address, "echo", 3) == ("echo", 3)
            # the dropped note never arrived (in-process calls are delivered in order)
            assert [c.args[0] for c in target.calls] == [0, 2, 3]
            assert [(c.source, c.target, c.method, c.action) for c in rpc.intercepted] == [
                ("caller", target.address, "echo", FaultAction.DROP),
                ("caller", target.address, "note", FaultAction.DROP),
            ]
            # connecting is subject to the rules too
            rpc.drop("caller", "target", methods=["connect"])
            caller.gateways.clear()
            with pytest.raises(RpcTimeout, match="connect to inproc://target"):
                await caller.call(target.address, "echo", 4)

    asyncio.run(main())


def test_rules_apply_to_gateways_connected_before_them_and_can_be_limited_to_methods() -> None:
    async def main() -> None:
        async with two_endpoints() as (rpc, _caller, target):
            gateway = await rpc.connect(target.address, EchoGateway)
            rule = rpc.drop(target="target", methods=["note"])
            assert await gateway.note("lost") is None
            assert await gateway.echo(1) == ("echo", 1)  # other methods pass
            rpc.remove(rule)
            await gateway.note("kept")
            await target.wait_for_call("note")
            assert [c.args[0] for c in target.calls_to("note")] == ["kept"]
            assert rpc.intercepted == [InterceptedCall(None, target.address, "note", FaultAction.DROP, rule.id)]

    asyncio.run(main())


def test_delay_delivers_late_and_fail_refuses_at_once() -> None:
    async def main() -> None:
        async with two_endpoints() as (rpc, caller, target):
            rule = rpc.delay(0.1, source="caller", target="targ*")
            started = time.monotonic()
            assert await caller.call(target.address, "echo", 1) == ("echo", 1)
            assert time.monotonic() - started >= 0.1 * 2  # connect and echo were both delayed
            assert await caller.call(target.address, "note", "late") is None
            assert target.calls_to("note") == []
            await target.wait_for_call("note", timeout_s=5)
            rpc.remove(rule)
            rpc.delay(TIMEOUT_S * 2, target="target", methods=["echo"])  # longer than the timeout
            gateway = await rpc.connect(target.address, EchoGateway)
            with pytest.raises(RpcTimeout):
                await gateway.echo(2)
            rpc.heal()
            rpc.fail(target="inproc://target")
            started = time.monotonic()
            with pytest.raises(RecipientUnreachable, match="fault injection"):
                await rpc.connect(target.address, EchoGateway)
            with pytest.raises(RecipientUnreachable, match="fault injection"):
                await gateway.note("refused")
            assert time.monotonic() - started < TIMEOUT_S
            assert [c.args[0] for c in target.calls_to("echo")] == [1]

    asyncio.run(main())


def test_partition_cuts_both_directions_and_heal_restores_them() -> None:
    async def main() -> None:
        rpc = FaultInjectingRpcService(InProcRpcService(TIMEOUT_S), TIMEOUT_S)
        a, b = Caller("side-a", rpc), Caller("side-b", rpc)
        target_of_a = TestingEndpoint("side-a-echo", EchoGateway, echo=lambda v: v)
        rpc.register(target_of_a)
        for e in (a, b, target_of_a):
            await e.start()
        try:
            echo_b = TestingEndpoint("side-b-echo", EchoGateway, echo=lambda v: v)
            rpc.register(echo_b)
            await echo_b.start()
            rpc.partition("side-a*", "side-b*")
            with pytest.raises(RpcTimeout):
                await a.call(echo_b.address, "echo", 1)
            with pytest.raises(RpcTimeout):
                await b.call(target_of_a.address, "echo", 2)
            assert await a.call(target_of_a.address, "echo", 3) == 3  # same side: fine
            rpc.heal()
            assert rpc.rules == ()
            assert await a.call(echo_b.address, "echo", 4) == 4
            await echo_b.stop()
        finally:
            for e in (a, b, target_of_a):
                await e.stop()
            await rpc.close()

    asyncio.run(main())


def test_invalid_rules_are_rejected() -> None:
    rpc = FaultInjectingRpcService(InProcRpcService())
    with pytest.raises(ValueError, match="source and a target"):
        rpc.drop("", "x")
    with pytest.raises(ValueError, match="delay_s > 0"):
        rpc.add_rule("*", "*", FaultAction.DELAY)
    with pytest.raises(ValueError, match=">= 0"):
        rpc.delay(-1)


# ---- a TaskManager partitioned away from the JobManager (MiniCluster, no Spark) -------------------

NOOP = "flintlock.testing.invokables:NoOpInvokable"
BLOCKING = "flintlock.testing.invokables:BlockingInvokable"
FAST_HEARTBEATS = {
    "heartbeat.interval": "50 ms",
    "heartbeat.timeout": "500 ms",
    "rpc.ask-timeout": "1 s",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "5",
    "restart-strategy.fixed-delay.delay": "10 ms",
}


def produce_then_block(latch: str) -> JobGraph:
    """v0 (NoOp, produces a BLOCKING partition) -> v1 (blocks until the latch is released)."""
    ids = [JobVertexID.generate(), JobVertexID.generate()]
    ds = IntermediateDataSet(IntermediateDataSetID.generate(), ids[0], ResultPartitionType.BLOCKING,
                             ids[1], ShipStrategy.FORWARD)
    v0 = JobVertex(ids[0], "v0", 1, 128, NOOP, results=(ds,))
    v1 = JobVertex(ids[1], "v1", 1, 128, BLOCKING, inputs=(JobEdge(ds.id, ids[1], ShipStrategy.FORWARD),))
    return JobGraph(JobID.generate(), "produce-then-block", JobType.BATCH, (v0, v1), {LATCH_KEY: latch})


async def _isolate_the_task_manager_of_v1(cluster: MiniCluster, latch_name: str) -> dict[str, list[tuple[int, str]]]:
    """Run the job, cut v1's TaskManager off once v1 runs, release v1 once it restarted elsewhere.

    Returns ``vertex name -> [(attempt number, TaskManager id)]`` over all attempts, oldest first.
    """
    faulty: FaultInjectingRpcService = cluster.rpc_service
    job = produce_then_block(latch_name)
    with blocking_latch_scope(latch_name) as latch:
        await cluster.submit_job(job)
        await asyncio.to_thread(latch.started.acquire, True, 10)
        archived = await cluster.dispatcher_gateway.request_job(job.job_id)
        lost_tm = archived.vertices[1].subtasks[0].task_manager
        assert lost_tm is not None
        faulty.partition(f"taskexecutor-{lost_tm}")

        async def v1_restarted_elsewhere() -> bool:
            graph = await cluster.dispatcher_gateway.request_job(job.job_id)
            current = graph.vertices[1].subtasks[0]
            return current.attempt_number >= 1 and current.state is ExecutionState.RUNNING

        deadline = asyncio.get_running_loop().time() + 15
        while not await v1_restarted_elsewhere():
            assert asyncio.get_running_loop().time() < deadline, "v1 did not restart"
            await asyncio.sleep(0.02)
        latch.release.set()
        result = await cluster.wait_for_job_result(job.job_id, timeout_s=15)
    assert result.application_status == "SUCCEEDED", result.failure
    archived = await cluster.dispatcher_gateway.request_job(job.job_id)
    attempts = {
        v.name: sorted((e.attempt_number, str(e.task_manager)) for e in (*v.prior_attempts, *v.subtasks))
        for v in archived.vertices
    }
    assert lost_tm not in {tm for _, tm in attempts["v1"][1:]}, attempts
    assert attempts["v1"][0] == (0, lost_tm)
    assert any(c.target.endswith(f"taskexecutor-{lost_tm}") for c in faulty.intercepted)
    return attempts


@gen_mini_cluster(task_managers=2, slots_per_task_manager=1, config=FAST_HEARTBEATS, fault_injection=True)
async def test_lost_task_manager_takes_its_local_partitions_with_it(cluster: MiniCluster) -> None:
    attempts = await _isolate_the_task_manager_of_v1(cluster, "tm-local")
    lost_tm = attempts["v1"][0][1]
    # v1 reused v0's slot, so v0's partition was on the lost TaskManager's disk: v0 ran again
    assert attempts["v0"][0] == (0, lost_tm)
    assert [a for a, _ in attempts["v0"]] == [0, 1] and attempts["v0"][1][1] != lost_tm


def test_partitions_on_shared_storage_survive_the_lost_task_manager(tmp_path: Path) -> None:
    conf = {**FAST_HEARTBEATS, "shuffle.storage-dir": str(tmp_path / "shared")}

    @gen_mini_cluster(task_managers=2, slots_per_task_manager=1, config=conf, fault_injection=True)
    async def body(cluster: MiniCluster) -> None:
        attempts = await _isolate_the_task_manager_of_v1(cluster, "shared-storage")
        assert [a for a, _ in attempts["v0"]] == [0]  # not re-run: its partition survived

    body()
