"""The JobManager process: ResourceManager, Dispatcher (with its JobMasters) and the REST server.

Follows Flink's ``StandaloneSessionClusterEntrypoint``. RPC (gRPC) listens on
``jobmanager.bind-host:jobmanager.rpc.port`` and advertises ``jobmanager.rpc.address``; REST listens on
``rest.bind-address:rest.port``. Both bind to 127.0.0.1 unless configured otherwise. The process
never starts Spark. It runs until SIGTERM/SIGINT or ``DELETE /cluster``.

    python -m flintlock jobmanager [-D key=value ...] [--port-file FILE]
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path

from flintlock.config import Configuration
from flintlock.config.options import (
    JM_BIND_HOST,
    JM_RPC_ADDRESS,
    JM_RPC_PORT,
    REST_BIND_ADDRESS,
    REST_PORT,
    RPC_ASK_TIMEOUT,
)
from flintlock.runtime.dispatcher.dispatcher import Dispatcher
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.entrypoint.common import (
    cluster_secret,
    install_stop_signals,
    write_port_file,
)
from flintlock.runtime.logs.files import LogDirectory
from flintlock.runtime.logs.process_logs import (
    log_directory_for,
    start_process_log,
    stop_process_log,
)
from flintlock.runtime.metrics.loop_lag import LoopLagMonitor
from flintlock.runtime.metrics.prometheus import job_manager_source, start_prometheus_reporter
from flintlock.runtime.resourcemanager.resource_manager import ResourceManager

__all__ = ["resource_manager_address", "run_job_manager"]

log = logging.getLogger(__name__)


def resource_manager_address(host: str, port: int) -> str:
    """The RPC address TaskManagers register at."""
    return f"grpc://{host}:{port}/resourcemanager"


async def run_job_manager(configuration: Configuration, port_file: str | Path | None = None,
                          stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (or a signal / ``DELETE /cluster`` arrives).

    Logs go to ``flintlock-jobmanager-<host>-<pid>.log`` in ``env.log.dir`` too (served by
    ``/jobmanager/log``); with ``metrics.reporter.prom.port`` set, a Prometheus endpoint runs and
    its port is written to the port file as ``metrics_port``.
    """
    logs = log_directory_for(configuration, "flintlock-jobmanager-logs-")
    log_handler = start_process_log(
        logs, f"flintlock-jobmanager-{socket.gethostname()}-{os.getpid()}.log")
    try:
        await _serve(configuration, port_file, stop, logs)
    finally:
        stop_process_log(log_handler)
        logs.close()


async def _serve(configuration: Configuration, port_file: str | Path | None,
                 stop: asyncio.Event | None, logs: LogDirectory) -> None:
    from flintlock.runtime.rest.app import create_app
    from flintlock.runtime.rest.server import RestServer
    from flintlock.runtime.rpc.grpc_service import GrpcRpcService

    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    loop_lag = LoopLagMonitor.from_configuration("JobManager", configuration).start()
    secret = cluster_secret(configuration)
    rpc = GrpcRpcService(
        bind_host=configuration.get(JM_BIND_HOST),
        port=configuration.get(JM_RPC_PORT),
        secret=secret,
        advertised_host=configuration.get(JM_RPC_ADDRESS),
        timeout_s=configuration.get(RPC_ASK_TIMEOUT),
    )
    await rpc.start()
    resource_manager = ResourceManager(rpc, configuration)
    await resource_manager.start()
    dispatcher = Dispatcher(rpc, configuration, resource_manager.address,
                            on_shutdown_requested=stop.set)
    await dispatcher.start()
    gateway = await rpc.connect(dispatcher.address, DispatcherGateway)
    rest = RestServer(create_app(gateway, configuration, secret=secret, job_manager_logs=logs),
                      host=configuration.get(REST_BIND_ADDRESS), port=configuration.get(REST_PORT))
    await rest.start()
    reporter = await start_prometheus_reporter(configuration, [job_manager_source(gateway)])
    write_port_file(port_file, rpc_port=rpc.port, rest_port=rest.port,
                    metrics_port=reporter.port if reporter is not None else None)
    log.info("JobManager serving: RPC %s:%d, REST http://%s:%d", configuration.get(JM_BIND_HOST),
             rpc.port, configuration.get(REST_BIND_ADDRESS), rest.port)
    try:
        await stop.wait()
    finally:
        log.info("JobManager stopping")
        if reporter is not None:
            await reporter.stop()
        await rest.stop()
        await dispatcher.stop()
        await resource_manager.stop()
        await rpc.close()
        await loop_lag.stop()
        if port_file is not None:
            Path(port_file).unlink(missing_ok=True)
