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
import shutil
import tempfile
from pathlib import Path

from flintlock.config import Configuration
from flintlock.config.options import (
    JM_RPC_ADDRESS,
    JM_RPC_PORT,
    RPC_ASK_TIMEOUT,
    SHUFFLE_DIR,
    TASK_SLOTS,
    TM_HOST,
    TM_RPC_PORT,
)
from flintlock.runtime.entrypoint.common import (
    cluster_secret,
    install_stop_signals,
    write_port_file,
)
from flintlock.runtime.entrypoint.job_manager import resource_manager_address
from flintlock.runtime.ids import ResourceID

__all__ = ["run_task_manager"]

log = logging.getLogger(__name__)


async def run_task_manager(configuration: Configuration, port_file: str | Path | None = None,
                           stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (or SIGTERM/SIGINT)."""
    from flintlock.runtime.rpc.grpc_service import GrpcRpcService
    from flintlock.runtime.spark.session import SparkSessionProvider
    from flintlock.runtime.taskexecutor.task_executor import TaskExecutor

    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    spark = SparkSessionProvider(configuration)
    log.info("Starting the Spark session")
    await asyncio.to_thread(spark.get)
    owned_shuffle_dir = None
    shuffle_dir = configuration.get(SHUFFLE_DIR)
    if not shuffle_dir:
        owned_shuffle_dir = shuffle_dir = tempfile.mkdtemp(prefix="flintlock-shuffle-")
    host = configuration.get(TM_HOST)
    rpc = GrpcRpcService(bind_host=host, port=configuration.get(TM_RPC_PORT),
                         secret=cluster_secret(configuration), advertised_host=host,
                         timeout_s=configuration.get(RPC_ASK_TIMEOUT))
    await rpc.start()
    rm_address = resource_manager_address(configuration.get(JM_RPC_ADDRESS),
                                          configuration.get(JM_RPC_PORT))
    task_executor = TaskExecutor(
        rpc, configuration, rm_address, {"spark": spark, "shuffle_dir": shuffle_dir},
        resource_id=ResourceID.generate(f"{host}:{rpc.port}"),
        number_of_slots=configuration.get(TASK_SLOTS), spark_info=spark.describe(),
    )
    await task_executor.start()
    write_port_file(port_file, rpc_port=rpc.port, resource_id=str(task_executor.resource_id))
    log.info("TaskManager %s serving on %s:%d, registering at %s", task_executor.resource_id, host,
             rpc.port, rm_address)
    try:
        await stop.wait()
    finally:
        log.info("TaskManager stopping")
        await task_executor.stop()
        await rpc.close()
        spark.stop()
        if owned_shuffle_dir:
            shutil.rmtree(owned_shuffle_dir, ignore_errors=True)
        if port_file is not None:
            Path(port_file).unlink(missing_ok=True)
