"""MiniCluster: the JobManager components and N TaskExecutors in one process and one loop.

Follows Flink ``runtime/minicluster/MiniCluster``: the same Dispatcher, ResourceManager, JobMasters
and TaskExecutors as a session cluster, connected by the in-process RPC transport. Used for local
execution (``env.execute()`` with no cluster configured), debugging and most tests.

All TaskExecutors of the process share one Spark Connect session (``services["spark"]``), as every
TaskManager process has exactly one. By default the session is warmed up in a worker thread while
the cluster starts, so the first task does not pay its ~5 s start alone.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import (
    LOCAL_TASKMANAGERS,
    RPC_ASK_TIMEOUT,
    SHUFFLE_DIR,
    TASK_SLOTS,
)
from flintlock.runtime.clock import Clock
from flintlock.runtime.dispatcher.dispatcher import Dispatcher
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.executiongraph.archived import JobResult
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.metrics.loop_lag import LoopLagMonitor
from flintlock.runtime.resourcemanager.gateway import ResourceManagerGateway
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService, RpcService

__all__ = ["MiniCluster"]

log = logging.getLogger(__name__)


class MiniCluster:
    """An in-process cluster.

    Args:
        configuration: cluster configuration (``local.number-taskmanager``,
            ``taskmanager.numberOfTaskSlots``, ``shuffle.storage-dir``, ``spark.*``, ...).
        num_task_managers: overrides ``local.number-taskmanager``.
        slots_per_task_manager: overrides ``taskmanager.numberOfTaskSlots``.
        services: TaskManager services handed to every task (``"spark"``, ``"shuffle_dir"``);
            missing entries are created (a SparkSessionProvider, a temporary shuffle directory).
        warm_up_spark: start the Spark session in the background during ``start()``.
        clock: time source of all components.
        rpc_service: the transport of all components (default: a new ``InProcRpcService``);
            e.g. a ``FaultInjectingRpcService`` wrapping one, for failure tests. Closed by
            ``close()``.
    """

    def __init__(
        self,
        configuration: Configuration | None = None,
        *,
        num_task_managers: int | None = None,
        slots_per_task_manager: int | None = None,
        services: Mapping[str, Any] | None = None,
        warm_up_spark: bool = False,
        clock: Clock | None = None,
        rpc_service: RpcService | None = None,
    ) -> None:
        self.configuration = configuration.copy() if configuration else Configuration()
        self.num_task_managers = num_task_managers or self.configuration.get(LOCAL_TASKMANAGERS)
        self.slots_per_task_manager = slots_per_task_manager or self.configuration.get(TASK_SLOTS)
        self._services: dict[str, Any] = dict(services or {})
        self._warm_up_spark = warm_up_spark
        self._clock = clock
        self._owned_shuffle_dir: str | None = None
        self.rpc_service: Any = rpc_service or InProcRpcService(
            timeout_s=self.configuration.get(RPC_ASK_TIMEOUT)
        )
        self.resource_manager: Any = None
        self.dispatcher: Dispatcher | None = None
        self.task_executors: list[Any] = []
        self._dispatcher_gateway: DispatcherGateway | None = None
        self._warm_up: asyncio.Future[Any] | None = None
        self._loop_lag: LoopLagMonitor | None = None
        self._started = False

    # ---- life cycle ------------------------------------------------------------------------------

    async def start(self) -> MiniCluster:
        """Start the ResourceManager, Dispatcher and TaskExecutors; return once all registered."""
        from flintlock.runtime.resourcemanager.resource_manager import ResourceManager

        if "shuffle_dir" not in self._services:
            configured = self.configuration.get(SHUFFLE_DIR)
            if configured:
                self._services["shuffle_dir"] = configured
            else:
                self._owned_shuffle_dir = tempfile.mkdtemp(prefix="flintlock-shuffle-")
                self._services["shuffle_dir"] = self._owned_shuffle_dir
        if "spark" not in self._services:
            from flintlock.runtime.spark.session import SparkSessionProvider

            self._services["spark"] = SparkSessionProvider(self.configuration)
        if self._warm_up_spark:
            self._warm_up = asyncio.ensure_future(asyncio.to_thread(self._services["spark"].get))

        self._loop_lag = LoopLagMonitor.from_configuration("MiniCluster", self.configuration)
        self._loop_lag.start()
        self.resource_manager = ResourceManager(self.rpc_service, self.configuration, clock=self._clock)
        await self.resource_manager.start()
        self.dispatcher = Dispatcher(
            self.rpc_service, self.configuration, self.resource_manager.address, clock=self._clock
        )
        await self.dispatcher.start()
        self._dispatcher_gateway = await self.rpc_service.connect(
            self.dispatcher.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_ID
        )
        for _ in range(self.num_task_managers):
            await self.add_task_manager()
        await self._wait_for_task_managers(self.num_task_managers)
        self._started = True
        log.info("MiniCluster started with %d TaskManager(s) x %d slot(s).",
                 self.num_task_managers, self.slots_per_task_manager)
        return self

    async def add_task_manager(self, configuration: Mapping[str, Any] | None = None) -> Any:
        """Start one more TaskExecutor (it registers with the ResourceManager);
        ``configuration``: keys of its own over the cluster's (e.g. an injected fault)."""
        from flintlock.runtime.taskexecutor.task_executor import TaskExecutor

        index = len(self.task_executors)
        te = TaskExecutor(
            self.rpc_service,
            self.configuration.copy().add_all(configuration) if configuration else
            self.configuration,
            self.resource_manager.address,
            self._services,
            resource_id=ResourceID.generate(f"taskmanager-{index}"),
            clock=self._clock,
            number_of_slots=self.slots_per_task_manager,
            # the TaskManagers share the process's Spark server: it counts once
            # (``ResourceOverview.spark_servers``); the session is not started for this
            spark_info=server_info() if (server_info := getattr(
                self._services["spark"], "server_info", None)) else None,
        )
        await te.start()
        self.task_executors.append(te)
        return te

    async def _wait_for_task_managers(self, count: int, timeout_s: float = 30.0) -> None:
        rm = await self.rpc_service.connect(self.resource_manager.address, ResourceManagerGateway,
                                            fencing_token=DEFAULT_LEADER_ID)
        deadline = asyncio.get_running_loop().time() + timeout_s
        seen = None
        while asyncio.get_running_loop().time() < deadline:
            seen = await rm.request_resource_overview()
            if seen.number_of_task_managers >= count:
                return
            await asyncio.sleep(0.005)
        raise TimeoutError(f"only {seen} TaskManagers registered within {timeout_s} s; expected {count}")

    async def close(self) -> None:
        """Stop every component; running jobs are cancelled with their tasks."""
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        for te in reversed(self.task_executors):
            await te.stop()
        self.task_executors.clear()
        if self.resource_manager is not None:
            await self.resource_manager.stop()
        if self._warm_up is not None:
            await asyncio.gather(self._warm_up, return_exceptions=True)
        await self.rpc_service.close()
        if self._loop_lag is not None:
            await self._loop_lag.stop()
        if self._owned_shuffle_dir:
            shutil.rmtree(self._owned_shuffle_dir, ignore_errors=True)
        self._started = False

    async def __aenter__(self) -> MiniCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- jobs ------------------------------------------------------------------------------------

    @property
    def dispatcher_gateway(self) -> DispatcherGateway:
        if self._dispatcher_gateway is None:
            raise RuntimeError("MiniCluster is not started")
        return self._dispatcher_gateway

    @property
    def services(self) -> Mapping[str, Any]:
        return self._services

    async def submit_job(self, job_graph: JobGraph) -> JobID:
        await self.dispatcher_gateway.submit_job(job_graph)
        return job_graph.job_id

    async def wait_for_job_result(self, job_id: JobID, timeout_s: float | None = None,
                                  poll_interval_s: float = 0.01) -> JobResult:
        """Poll the Dispatcher until the job is globally terminal and return its JobResult."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            result = await self.dispatcher_gateway.request_job_result(job_id)
            if result is not None:
                return result
            if deadline is not None and loop.time() > deadline:
                status = await self.dispatcher_gateway.request_job_status(job_id)
                raise TimeoutError(f"job {job_id} still {status.name} after {timeout_s} s")
            await asyncio.sleep(poll_interval_s)

    async def execute(self, job_graph: JobGraph, timeout_s: float | None = None) -> JobResult:
        """Submit and wait for the result."""
        await self.submit_job(job_graph)
        return await self.wait_for_job_result(job_graph.job_id, timeout_s)
