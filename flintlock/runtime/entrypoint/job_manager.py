"""The JobManager process: ResourceManager, Dispatcher (with its JobMasters) and the REST server.

Follows Flink's ``StandaloneSessionClusterEntrypoint``. RPC (gRPC) listens on
``jobmanager.bind-host:jobmanager.rpc.port`` and advertises ``jobmanager.rpc.address``; REST listens on
``rest.bind-address:rest.port``. Both bind to 127.0.0.1 unless configured otherwise. The process
never starts Spark. It runs until SIGTERM/SIGINT or ``DELETE /cluster``.

With high availability (``high-availability.type``) the process starts its RPC service and
contends for leadership; a standby runs nothing else. Once it leads it starts the
ResourceManager, the Dispatcher with the jobs recovered from the JobGraph store (those without a
result in the JobResultStore), REST and metrics, then publishes their addresses as the leader
information that TaskManagers and clients follow. Its port file says ``"leader": false`` while it
stands by and ``true`` (with the REST port) once it leads. A process that loses leadership stops.

    python -m flintlock jobmanager [-D key=value ...] [--port-file FILE]
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Any

from flintlock.config import Configuration
from flintlock.config.options import (
    CHECKPOINTS_DIR,
    JM_BIND_HOST,
    JM_RPC_ADDRESS,
    JM_RPC_PORT,
    REST_ADDRESS,
    REST_BIND_ADDRESS,
    REST_PORT,
    RPC_ASK_TIMEOUT,
)
from flintlock.runtime.dispatcher.dispatcher import Dispatcher
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.dispatcher.job_persistence import JobPersistence
from flintlock.runtime.entrypoint.common import (
    cluster_secret,
    install_stop_signals,
    write_port_file,
)
from flintlock.runtime.highavailability.asyncio_glue import LeadershipEvents, unless_stopped
from flintlock.runtime.highavailability.leader import LeaderInformation
from flintlock.runtime.highavailability.services import create_ha_services
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
    from flintlock.runtime.rpc.grpc_service import GrpcRpcService

    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    ha = create_ha_services(configuration)  # a clear error before anything starts
    if ha is not None and not configuration.get(CHECKPOINTS_DIR):
        # where the next leader finds the jobs' checkpoints (not this process's own directory)
        configuration = configuration.copy().add_all(
            {CHECKPOINTS_DIR.key: f"{ha.directory}/checkpoints"})
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
    election = None
    lost = asyncio.Event()  # set when this process stops leading (high availability)
    started: list[Any] = []  # what to stop, in reverse order
    try:
        session = ""
        if ha is not None:  # stand by until this process leads
            events = LeadershipEvents(asyncio.get_running_loop())
            election = ha.leader_election_service()
            election.start(events)
            lost = events.lost
            write_port_file(port_file, rpc_port=rpc.port, leader=False)
            log.info("JobManager standing by for leadership (%s), RPC %s:%d", ha.directory,
                     configuration.get(JM_BIND_HOST), rpc.port)
            granted = await unless_stopped(events.granted, stop)
            if granted is None:
                return
            session = granted
            log.info("JobManager leads (session %s)", session)
        rest, reporter, addresses = await _start_components(
            configuration, rpc, secret, logs, stop, ha, started)
        if election is not None:
            if not election.confirm_leadership(session, LeaderInformation(session, addresses)):
                log.error("leadership was lost before it could be confirmed")
                return
        write_port_file(port_file, rpc_port=rpc.port, rest_port=rest.port, leader=True,
                        metrics_port=reporter.port if reporter is not None else None)
        log.info("JobManager serving: RPC %s:%d, REST http://%s:%d",
                 configuration.get(JM_BIND_HOST), rpc.port,
                 configuration.get(REST_BIND_ADDRESS), rest.port)
        await unless_stopped(lost.wait(), stop)
        if lost.is_set():  # a deposed leader stops, so it cannot act on stale state
            log.error("JobManager lost its leadership (%s); stopping", events.why_lost)
    finally:
        log.info("JobManager stopping")
        for component in reversed(started):
            await component.stop()
        if election is not None:
            election.stop()
        await rpc.close()
        await loop_lag.stop()
        if port_file is not None:
            Path(port_file).unlink(missing_ok=True)


async def _start_components(configuration: Configuration, rpc: Any, secret: str | None,
                            logs: LogDirectory, stop: asyncio.Event, ha: Any,
                            started: list[Any]) -> tuple[Any, Any, dict[str, str]]:
    """Start the ResourceManager, the Dispatcher (with the recovered jobs under high
    availability), REST and the metrics reporter, appending each to ``started``; returns REST,
    the reporter and the leader addresses of the components."""
    from flintlock.runtime.rest.app import create_app
    from flintlock.runtime.rest.server import RestServer

    resource_manager = ResourceManager(rpc, configuration)
    await resource_manager.start()
    started.append(resource_manager)
    persistence = recovered = None
    if ha is not None:
        persistence = JobPersistence(ha.job_graph_store(), ha.job_result_store())
        recovered = await asyncio.to_thread(persistence.recover)
    dispatcher = Dispatcher(rpc, configuration, resource_manager.address,
                            on_shutdown_requested=stop.set, persistence=persistence,
                            recovered=recovered)
    await dispatcher.start()
    started.append(dispatcher)
    gateway = await rpc.connect(dispatcher.address, DispatcherGateway)
    rest = RestServer(create_app(gateway, configuration, secret=secret, job_manager_logs=logs),
                      host=configuration.get(REST_BIND_ADDRESS), port=configuration.get(REST_PORT))
    await rest.start()
    started.append(rest)
    reporter = await start_prometheus_reporter(configuration, [job_manager_source(gateway)])
    if reporter is not None:
        started.append(reporter)
    addresses = {"resourcemanager": resource_manager.address, "dispatcher": dispatcher.address,
                 "rest": f"http://{configuration.get(REST_ADDRESS)}:{rest.port}"}
    return rest, reporter, addresses
