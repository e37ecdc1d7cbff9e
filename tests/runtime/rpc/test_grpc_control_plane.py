"""The real control plane over gRPC: RM + Dispatcher on one GrpcRpcService, each TaskExecutor on its
own, and the job submitted from a fourth service (all in one process and loop, different ports).

The same scenario as ``tests/runtime/minicluster/test_minicluster_control_plane.py`` with test
invokables: every gateway call between JobManager and TaskManagers crosses the wire (encoded,
authenticated, decoded), while calls inside the JobManager short-circuit in process.
"""

from __future__ import annotations

import asyncio
import pathlib
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from flintlock.config import Configuration
from flintlock.runtime.dispatcher.dispatcher import Dispatcher
from flintlock.runtime.dispatcher.exceptions import DuplicateJobSubmissionException
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobStatus, JobType, ResultPartitionType, ShipStrategy
from flintlock.runtime.resourcemanager.resource_manager import ResourceManager
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.exceptions import RecipientUnreachable
from flintlock.runtime.rpc.grpc_service import GrpcRpcService
from flintlock.runtime.taskexecutor.task_executor import TaskExecutor
from flintlock.testing.clusters import NoSpark, leaked_task_threads
from flintlock.testing.invokables import FAILURE_MESSAGE_KEY

NOOP = "flintlock.testing.invokables:NoOpInvokable"
FAILING = "flintlock.testing.invokables:FailingInvokable"
SECRET = "grpc-control-plane-test-secret"


def chain_job(
    *stages: tuple[str, int, ShipStrategy | None],
    conf: dict[str, str] | None = None,
    name: str = "job",
) -> JobGraph:
    """A linear job: stage i consumes stage i-1 over the given ship strategy."""
    vertices: list[JobVertex] = []
    ids = [JobVertexID.generate() for _ in stages]
    prev_ds = None
    for i, (invokable, parallelism, _ship) in enumerate(stages):
        results: tuple[IntermediateDataSet, ...] = ()
        if i + 1 < len(stages):
            next_ship = stages[i + 1][2] or ShipStrategy.FORWARD
            ds = IntermediateDataSet(
                IntermediateDataSetID.generate(),
                ids[i],
                ResultPartitionType.BLOCKING,
                ids[i + 1],
                next_ship,
            )
            results = (ds,)
        inputs = (JobEdge(prev_ds.id, ids[i], prev_ds.ship_strategy),) if prev_ds else ()
        vertices.append(
            JobVertex(ids[i], f"v{i}", parallelism, 128, invokable, inputs=inputs, results=results)
        )
        prev_ds = results[0] if results else None
    return JobGraph(JobID.generate(), name, JobType.BATCH, tuple(vertices), conf or {})


@dataclass
class GrpcCluster:
    jm_rpc: GrpcRpcService
    client_rpc: GrpcRpcService
    dispatcher: Dispatcher
    resource_manager: ResourceManager
    task_executors: list[TaskExecutor] = field(default_factory=list)
    te_rpcs: list[GrpcRpcService] = field(default_factory=list)
    gateway: Any = None  # DispatcherGateway proxy held by the client service

    async def wait_for_result(self, job_id: JobID, timeout_s: float = 20.0) -> JobResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            result = await self.gateway.request_job_result(job_id)
            if result is not None:
                return result
            await asyncio.sleep(0.01)
        status = await self.gateway.request_job_status(job_id)
        raise AssertionError(f"job {job_id} still {status.name} after {timeout_s} s")

    async def wait_for_job_master_stopped(self, job_id: JobID, timeout_s: float = 10.0) -> None:
        """The Dispatcher stops a finished job's JobMaster in the background; wait for it.

        (Stopping the Dispatcher meanwhile cancels that background stop and leaves the JobMaster's
        mailbox running: a Dispatcher issue, not a transport one.)
        """
        address = f"grpc://127.0.0.1:{self.jm_rpc.port}/jobmaster-{job_id}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                self.jm_rpc.lookup(address)
            except RecipientUnreachable:
                return
            assert loop.time() < deadline, f"the JobMaster of {job_id} did not stop"
            await asyncio.sleep(0.01)


@asynccontextmanager
async def grpc_cluster(
    shuffle_dir: pathlib.Path, task_managers: int = 2, slots: int = 2
) -> AsyncIterator[GrpcCluster]:
    conf = Configuration()
    jm_rpc = GrpcRpcService(secret=SECRET, timeout_s=5.0)
    client_rpc = GrpcRpcService(secret=SECRET, timeout_s=5.0)
    await jm_rpc.start()
    await client_rpc.start()
    rm = ResourceManager(jm_rpc, conf)
    await rm.start()
    dispatcher = Dispatcher(jm_rpc, conf, rm.address)
    await dispatcher.start()
    cluster = GrpcCluster(jm_rpc, client_rpc, dispatcher, rm)
    try:
        for _ in range(task_managers):
            te_rpc = GrpcRpcService(secret=SECRET, timeout_s=5.0)
            await te_rpc.start()
            cluster.te_rpcs.append(te_rpc)
            te = TaskExecutor(
                te_rpc,
                conf,
                rm.address,
                services={"spark": NoSpark(), "shuffle_dir": str(shuffle_dir)},
                number_of_slots=slots,
            )
            await te.start()
            cluster.task_executors.append(te)
        cluster.gateway = await client_rpc.connect(dispatcher.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_ID)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20.0
        while (
            await cluster.gateway.request_cluster_overview()
        ).resources.number_of_task_managers < task_managers:
            assert loop.time() < deadline, "TaskExecutors did not register over gRPC"
            await asyncio.sleep(0.01)
        yield cluster
    finally:
        await dispatcher.stop()
        for te in reversed(cluster.task_executors):
            await te.stop()
        await rm.stop()
        for rpc in [client_rpc, *cluster.te_rpcs, jm_rpc]:
            await rpc.close()


def run(body: Any, timeout_s: float = 60.0) -> None:
    async def main() -> None:
        await asyncio.wait_for(body(), timeout_s)
        current = asyncio.current_task()
        leftover = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        assert not leftover, f"tasks left after the cluster closed: {leftover}"

    asyncio.run(main())
    leaked: list[str] = []
    waiter = threading.Event()
    for _ in range(200):
        leaked = leaked_task_threads()
        if not leaked:
            break
        waiter.wait(0.01)
    assert not leaked, f"Task threads left running: {leaked}"


def test_job_finishes_with_task_executors_on_their_own_grpc_services(
    tmp_path: pathlib.Path,
) -> None:
    async def body() -> None:
        async with grpc_cluster(tmp_path) as cluster:
            addresses = {te.address for te in cluster.task_executors}
            ports = {rpc.port for rpc in (cluster.jm_rpc, cluster.client_rpc, *cluster.te_rpcs)}
            assert len(ports) == 4 and all(a.startswith("grpc://127.0.0.1:") for a in addresses)
            assert cluster.dispatcher.address.startswith(f"grpc://127.0.0.1:{cluster.jm_rpc.port}/")

            job = chain_job(
                (NOOP, 3, None), (NOOP, 2, ShipStrategy.HASH), (NOOP, 1, ShipStrategy.GLOBAL)
            )
            await cluster.gateway.submit_job(job)  # the JobGraph crosses the wire
            result = await cluster.wait_for_result(job.job_id)
            assert result.application_status == "SUCCEEDED", result.failure
            archived = await cluster.gateway.request_job(job.job_id)
            assert archived.state is JobStatus.FINISHED
            assert [len(v.subtasks) for v in archived.vertices] == [3, 2, 1]
            used = {s.task_manager for v in archived.vertices for s in v.subtasks}
            assert used <= {str(te.resource_id) for te in cluster.task_executors} and used
            overview = await cluster.gateway.request_cluster_overview()
            assert overview.jobs_finished == 1 and overview.resources.number_of_task_managers == 2
            infos = await cluster.gateway.request_task_manager_infos()
            assert {i.address for i in infos} == addresses
            await cluster.wait_for_job_master_stopped(job.job_id)

            try:  # a flintlock exception of the Dispatcher comes back as its own class
                await cluster.gateway.submit_job(job)
            except DuplicateJobSubmissionException as exc:
                assert str(job.job_id) in str(exc)
            else:
                raise AssertionError("a duplicate submission was accepted")

    run(body)


def test_a_failing_job_reports_its_root_cause_across_the_wire(tmp_path: pathlib.Path) -> None:
    async def body() -> None:
        async with grpc_cluster(tmp_path) as cluster:
            job = chain_job(
                (NOOP, 2, None),
                (FAILING, 2, ShipStrategy.REBALANCE),
                conf={FAILURE_MESSAGE_KEY: "bad record 42", "restart-strategy.type": "none"},
            )
            await cluster.gateway.submit_job(job)
            result = await cluster.wait_for_result(job.job_id)
            assert result.application_status == "FAILED"
            assert result.failure is not None
            assert "bad record 42" in result.failure.error.message
            assert result.failure.task_name is not None and result.failure.task_name.startswith(
                "v1 ("
            )
            assert result.failure.location in {str(te.resource_id) for te in cluster.task_executors}
            await cluster.wait_for_job_master_stopped(job.job_id)

    run(body)
