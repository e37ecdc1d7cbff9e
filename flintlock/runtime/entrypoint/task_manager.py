"""The TaskManager process: one TaskExecutor with its slots and the process's Spark session.

Follows Flink's ``TaskManagerRunner``. The Spark Connect session starts once, at start-up, before
the TaskExecutor registers, so no task pays for it. The TaskExecutor registers with the
ResourceManager at ``jobmanager.rpc.address:jobmanager.rpc.port`` and keeps retrying while the
JobManager is not up (until ``taskmanager.registration.timeout``). Result partitions go to
``shuffle.storage-dir`` (default: a temporary directory removed when the process ends).

    python -m flintlock taskmanager [-D key=value ...] [--port-file FILE]
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flintlock.config import Configuration
from flintlock.config.options import (
    FAULT_TASK_SLOWDOWN,
    FAULT_TASK_SLOWDOWN_MODE,
    JM_RPC_ADDRESS,
    JM_RPC_PORT,
    RPC_ASK_TIMEOUT,
    RPC_FRAMESIZE,
    SHUFFLE_DIR,
    TASK_SLOTS,
    TM_HOST,
    TM_RPC_PORT,
    TM_SPARK_WARM_UP,
)
from flintlock.config.resource_manager_options import TM_RESOURCE_ID
from flintlock.runtime.entrypoint.common import (
    cluster_secret,
    install_stop_signals,
    resource_manager_address,
    write_port_file,
)
from flintlock.runtime.highavailability.asyncio_glue import LeaderAddressWatcher, unless_stopped
from flintlock.runtime.highavailability.services import create_ha_services
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.logs.files import LogDirectory
from flintlock.runtime.logs.process_logs import (
    file_name_part,
    log_directory_for,
    start_process_log,
    stop_process_log,
)
from flintlock.runtime.metrics.loop_lag import LoopLagMonitor
from flintlock.runtime.metrics.prometheus import start_prometheus_reporter, task_manager_source
from flintlock.runtime.net.ssl_utils import internal_pem_files, is_internal_ssl_enabled
from flintlock.runtime.processes import PARENT_PID_ENV, exit_with_parent
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID

if TYPE_CHECKING:
    from flintlock.runtime.spark.session import SparkSessionProvider
    from flintlock.runtime.spark.throttle import ProcessTreeThrottle

__all__ = ["run_task_manager"]

log = logging.getLogger(__name__)


async def run_task_manager(configuration: Configuration, port_file: str | Path | None = None,
                           stop: asyncio.Event | None = None,
                           spark: SparkSessionProvider | None = None) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT).

    The Spark session (``spark``, or a new provider for ``configuration``) starts first, in the
    background (``SparkSessionProvider.start_in_background``): its server's JVM comes up while
    the RPC service and the TaskExecutor start, and the TaskExecutor registers once it is up.
    ``flintlock taskmanager`` starts it before it even imports this module.

    Logs go to ``flintlock-taskmanager-<resource id>.log`` in ``env.log.dir`` too, next to the
    per-attempt task logs (both served through ``/taskmanagers/:id/logs``); with
    ``metrics.reporter.prom.port`` set, a Prometheus endpoint runs and its port is written to the
    port file as ``metrics_port``.
    """
    if spark is None:
        from flintlock.runtime.spark.session import SparkSessionProvider

        spark = SparkSessionProvider(configuration)
    log.info("Starting the Spark session")
    spark_started = spark.start_in_background()
    from flintlock.runtime.rpc.grpc_service import GrpcRpcService

    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    if os.environ.get(PARENT_PID_ENV):  # started by an active ResourceManager: end with it
        exit_with_parent(int(os.environ[PARENT_PID_ENV]))
    loop_lag = LoopLagMonitor.from_configuration("TaskManager", configuration).start()
    host = configuration.get(TM_HOST)
    rpc = GrpcRpcService(bind_host=host, port=configuration.get(TM_RPC_PORT),
                         secret=cluster_secret(configuration), advertised_host=host,
                         timeout_s=configuration.get(RPC_ASK_TIMEOUT),
                         max_message_bytes=configuration.get(RPC_FRAMESIZE),
                         tls=(internal_pem_files(configuration)
                              if is_internal_ssl_enabled(configuration) else None))
    await rpc.start()
    configured_id = configuration.get(TM_RESOURCE_ID)  # set by an active ResourceManager
    resource_id = (ResourceID(configured_id) if configured_id
                   else ResourceID.generate(f"{host}:{rpc.port}"))
    loop_lag.name = f"TaskManager {resource_id}"
    logs = log_directory_for(configuration, "flintlock-taskmanager-logs-")
    log_handler = start_process_log(
        logs, f"flintlock-taskmanager-{file_name_part(str(resource_id))}.log")
    try:
        await _serve(configuration, port_file, stop, rpc, resource_id, logs, spark,
                     spark_started)
    finally:
        await loop_lag.stop()
        stop_process_log(log_handler)
        logs.close()


async def _serve(configuration: Configuration, port_file: str | Path | None, stop: asyncio.Event,
                 rpc: Any, resource_id: ResourceID, logs: LogDirectory,
                 spark: SparkSessionProvider, spark_started: Future[Any]) -> None:
    from flintlock.runtime.taskexecutor.gateway import TaskExecutorGateway
    from flintlock.runtime.taskexecutor.task_executor import TaskExecutor

    session = await asyncio.wrap_future(spark_started)
    throttle = _slow_node_throttle(configuration)
    owned_shuffle_dir = None
    shuffle_dir = configuration.get(SHUFFLE_DIR)
    if not shuffle_dir:
        owned_shuffle_dir = shuffle_dir = tempfile.mkdtemp(prefix="flintlock-shuffle-")
    ha = create_ha_services(configuration)
    leader: LeaderAddressWatcher | None = None
    retrieval = None
    leader_id = DEFAULT_LEADER_ID
    if ha is None:
        rm_address = resource_manager_address(configuration.get(JM_RPC_ADDRESS),
                                              configuration.get(JM_RPC_PORT))
    else:  # the leading JobManager's ResourceManager, and whoever leads next
        leader = LeaderAddressWatcher("resourcemanager", asyncio.get_running_loop())
        retrieval = ha.leader_retrieval_service()
        retrieval.start(leader)
        log.info("Waiting for a JobManager leader (%s)", ha.directory)
        found = await unless_stopped(leader.wait_for_address(), stop)
        if found is None:  # stopped before any JobManager led
            retrieval.stop()
            ha.close()
            if throttle is not None:
                throttle.stop()
            spark.stop()
            if owned_shuffle_dir:
                shutil.rmtree(owned_shuffle_dir, ignore_errors=True)
            return
        rm_address, leader_id = found, leader.session_id or DEFAULT_LEADER_ID
    task_executor = TaskExecutor(
        rpc, configuration, rm_address, {"spark": spark, "shuffle_dir": shuffle_dir, "logs": logs},
        resource_id=resource_id,
        number_of_slots=configuration.get(TASK_SLOTS), spark_info=spark.describe(),
        leader_id=leader_id,
    )
    await task_executor.start()
    if leader is not None:
        def leader_changed(address: str | None, session_id: str | None) -> None:
            if address:
                task_executor.post(task_executor.notify_resource_manager_leader, address,
                                   session_id)

        leader.on_change(leader_changed)
        if leader.address is not None:  # the leader now (it may have changed meanwhile)
            task_executor.post(task_executor.notify_resource_manager_leader, leader.address,
                               leader.session_id)
    warming: asyncio.Task[float] | None = None
    if configuration.get(TM_SPARK_WARM_UP):
        from flintlock.runtime.spark.warm_up import warm_up

        # in the background: registration is not delayed, and a task that arrives meanwhile
        # shares the class loading and code generation the warm-up already did
        warming = asyncio.create_task(asyncio.to_thread(warm_up, session, owned_shuffle_dir),
                                      name="spark-warm-up")
    reporter = await start_prometheus_reporter(configuration, [task_manager_source(
        [await rpc.connect(task_executor.address, TaskExecutorGateway)])])
    write_port_file(port_file, rpc_port=rpc.port, resource_id=str(task_executor.resource_id),
                    metrics_port=reporter.port if reporter is not None else None)
    log.info("TaskManager %s serving on %s:%d, registering at %s", task_executor.resource_id,
             configuration.get(TM_HOST), rpc.port, rm_address)
    try:
        await stop.wait()
    finally:
        log.info("TaskManager stopping")
        if retrieval is not None:
            retrieval.stop()
        if ha is not None:
            ha.close()
        if reporter is not None:
            await reporter.stop()
        await task_executor.stop()
        await rpc.close()
        if throttle is not None:
            throttle.stop()  # the server must run to stop
        spark.stop()  # ends a warm-up still running (its Spark calls fail; it logs and returns)
        if warming is not None:
            await asyncio.wait([warming], timeout=10)
        if owned_shuffle_dir:
            shutil.rmtree(owned_shuffle_dir, ignore_errors=True)
        if port_file is not None:
            Path(port_file).unlink(missing_ok=True)


def _slow_node_throttle(configuration: Configuration) -> ProcessTreeThrottle | None:
    """The injected fault ``$internal.fault.task-slowdown`` in its ``throttle`` mode: this
    TaskManager's embedded Spark server runs 1/factor of the time (``spark/throttle.py``),
    started here; None without that fault or without an embedded server."""
    factor = configuration.get(FAULT_TASK_SLOWDOWN)
    if factor <= 1.0 or configuration.get(FAULT_TASK_SLOWDOWN_MODE) != "throttle":
        return None
    from flintlock.runtime.spark.session import embedded_server_pid
    from flintlock.runtime.spark.throttle import DutyCycle, ProcessTreeThrottle

    pid = embedded_server_pid()
    if pid is None:
        log.warning("$internal.fault.task-slowdown.mode throttle needs an embedded Spark "
                    "server; this TaskManager's Spark is not slowed")
        return None
    throttle = ProcessTreeThrottle(pid, DutyCycle.for_slowdown(factor))
    throttle.start()
    return throttle
