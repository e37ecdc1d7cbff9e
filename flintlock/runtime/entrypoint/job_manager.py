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
stands by and ``true`` (with the REST port) once it leads. A process that loses leadership stops
those components (their jobs are suspended, for the next leader to run) and stands by again.

    python -m flintlock jobmanager [-D key=value ...] [--port-file FILE]
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flintlock.config import Configuration, IllegalConfigurationException
from flintlock.config.options import (
    CHECKPOINTS_DIR,
    IO_POOL_SIZE,
    JM_BIND_HOST,
    JM_RPC_ADDRESS,
    JM_RPC_PORT,
    REST_ADDRESS,
    REST_BIND_ADDRESS,
    REST_PORT,
    RPC_ASK_TIMEOUT,
    RPC_FRAMESIZE,
    SHUTDOWN_ON_APPLICATION_FINISH,
)
from flintlock.config.resource_manager_options import RM_TYPE
from flintlock.runtime.dispatcher.dispatcher import Dispatcher
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.dispatcher.job_persistence import JobPersistence
from flintlock.runtime.dispatcher.mini_dispatcher import MiniDispatcherGateway, run_until_job_done
from flintlock.runtime.entrypoint.common import (
    cluster_secret,
    install_stop_signals,
    resource_manager_address,
    write_port_file,
)
from flintlock.runtime.highavailability.asyncio_glue import (
    LeaderAddressWatcher,
    LeadershipEvents,
    unless_stopped,
)
from flintlock.runtime.highavailability.job_managers import (
    JobManagerRecord,
    check_same_cluster,
)
from flintlock.runtime.highavailability.leader import (
    LeaderInformation,
    LeadershipCheck,
    LeadershipLostException,
)
from flintlock.runtime.highavailability.services import create_ha_services
from flintlock.runtime.io_executor import configure_io_pool, prestart_io_threads
from flintlock.runtime.logs.files import LogDirectory
from flintlock.runtime.logs.process_logs import (
    log_directory_for,
    start_process_log,
    stop_process_log,
)
from flintlock.runtime.metrics.loop_lag import LoopLagMonitor
from flintlock.runtime.metrics.prometheus import job_manager_source, start_prometheus_reporter
from flintlock.runtime.net.ssl_utils import (
    internal_pem_files,
    is_internal_ssl_enabled,
    rest_scheme,
)
from flintlock.runtime.resourcemanager.resource_manager import ResourceManager
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID

if TYPE_CHECKING:
    from flintlock.client.application import ApplicationResult, ApplicationSpec

__all__ = ["resource_manager_address", "run_job_manager"]

log = logging.getLogger(__name__)


async def run_job_manager(configuration: Configuration, port_file: str | Path | None = None,
                          stop: asyncio.Event | None = None,
                          application: ApplicationSpec | None = None,
                          per_job: str | None = None) -> int:
    """Serve until ``stop`` is set (or a signal / ``DELETE /cluster`` arrives); returns the
    process's exit code.

    With ``application`` (an application cluster, Flink's ``ApplicationClusterEntryPoint``) the
    JobManager runs the program's main() itself (``flintlock.client.application``) and, with
    ``execution.shutdown-on-application-finish``, stops once it and its jobs ended; the exit code
    is then the application's status (0 succeeded, 1 failed, 2 cancelled). With ``per_job``
    (``"attached"`` or ``"detached"``, a per-job cluster) the Dispatcher is a MiniDispatcher: it
    runs the first submitted job only and the process exits once it ended (attached: and its
    result was fetched), with the same exit codes.

    Logs go to ``flintlock-jobmanager-<host>-<pid>.log`` in ``env.log.dir`` too (served by
    ``/jobmanager/log``); with ``metrics.reporter.prom.port`` set, a Prometheus endpoint runs and
    its port is written to the port file as ``metrics_port``.
    """
    logs = log_directory_for(configuration, "flintlock-jobmanager-logs-")
    log_handler = start_process_log(
        logs, f"flintlock-jobmanager-{socket.gethostname()}-{os.getpid()}.log")
    try:
        return await _serve(configuration, port_file, stop, logs, application, per_job)
    finally:
        stop_process_log(log_handler)
        logs.close()


async def _serve(configuration: Configuration, port_file: str | Path | None,
                 stop: asyncio.Event | None, logs: LogDirectory,
                 application: ApplicationSpec | None, per_job: str | None) -> int:
    from flintlock.runtime.rpc.grpc_service import GrpcRpcService

    stop = stop or asyncio.Event()
    install_stop_signals(stop)
    ha = create_ha_services(configuration)  # a clear error before anything starts
    if ha is not None and per_job is not None:
        raise IllegalConfigurationException(
            "per-job clusters with high availability are not supported (Flink 2.0 removed "
            "per-job mode); run the program with --target application, whose JobManagers can "
            "stand by for each other")
    exit_code = 0
    if ha is not None:
        await asyncio.to_thread(ha.check_storage)
    if ha is not None and not configuration.get(CHECKPOINTS_DIR):
        # where the next leader finds the jobs' checkpoints (not this process's own directory)
        configuration = configuration.copy().add_all(
            {CHECKPOINTS_DIR.key: f"{ha.directory}/checkpoints"})
    loop_lag = LoopLagMonitor.from_configuration("JobManager", configuration).start()
    configure_io_pool(configuration.get(IO_POOL_SIZE))
    await asyncio.to_thread(prestart_io_threads)
    secret = cluster_secret(configuration)
    rpc = GrpcRpcService(
        bind_host=configuration.get(JM_BIND_HOST),
        port=configuration.get(JM_RPC_PORT),
        secret=secret,
        advertised_host=configuration.get(JM_RPC_ADDRESS),
        timeout_s=configuration.get(RPC_ASK_TIMEOUT),
        max_message_bytes=configuration.get(RPC_FRAMESIZE),
        tls=internal_pem_files(configuration) if is_internal_ssl_enabled(configuration) else None,
    )
    await rpc.start()
    registry = None
    try:
        if ha is not None:  # a clear error, before contending, for another cluster's id
            registry = await asyncio.to_thread(
                _announce, ha, f"{configuration.get(JM_RPC_ADDRESS)}:{rpc.port}", secret)
        if ha is None:
            started: list[Any] = []
            try:
                wrap = (None if per_job is None else functools.partial(
                    MiniDispatcherGateway, attached=per_job != "detached"))
                rest, reporter, _, dispatcher = await _start_components(
                    configuration, rpc, secret, logs, stop, None, started, wrap_gateway=wrap)
                _serving(configuration, rpc, rest, reporter, port_file)
                if per_job is not None:
                    exit_code = await run_until_job_done(dispatcher, stop)
                elif application is not None:
                    exit_code = await _run_application(application, dispatcher, configuration,
                                                       stop)
                else:
                    await stop.wait()
            finally:
                log.info("JobManager stopping")
                await _stop_all(started)
        else:
            while not stop.is_set():  # stand by, lead until leadership is lost, stand by again
                ended = await _lead_once(configuration, rpc, secret, logs, stop, ha, port_file,
                                         application)
                if ended is not None:
                    exit_code = ended
    finally:
        if registry is not None:
            await asyncio.to_thread(registry.unregister)
        if ha is not None:
            ha.close()
        await rpc.close()
        await loop_lag.stop()
        if port_file is not None:
            Path(port_file).unlink(missing_ok=True)
    return exit_code


async def _run_application(application: ApplicationSpec, dispatcher: Any,
                           configuration: Configuration, stop: asyncio.Event) -> int:
    """Run the application (``ApplicationDispatcherBootstrap``); returns its exit code, after
    ``stop`` unless ``execution.shutdown-on-application-finish``."""
    from flintlock.client.application import ApplicationStatus, run_application

    result = await run_application(application, dispatcher, configuration, stop)
    if result is None:
        log.info("Application stopped before it finished")
        return ApplicationStatus.CANCELED.exit_code
    return await _application_ended(result, configuration, stop)


async def _application_ended(result: ApplicationResult, configuration: Configuration,
                             stop: asyncio.Event) -> int:
    """Log how the application ended; stop (``execution.shutdown-on-application-finish``) or
    serve until stopped; returns its exit code."""
    jobs = ", ".join(f"{job} {status}" for job, status in result.jobs.items()) or "no jobs"
    log.info("Application %s (%s)", result.status.name, jobs)
    if result.diagnostics:
        log.error("The application's main() raised:\n%s", result.diagnostics)  # also on stderr
    if configuration.get(SHUTDOWN_ON_APPLICATION_FINISH):
        stop.set()
    else:
        await stop.wait()
    return result.status.exit_code


def _announce(ha: Any, rpc_address: str, secret: str | None) -> Any:
    """Register this JobManager in the HA store's list (``job_managers``) after checking that
    the JobManagers already there belong to the same cluster; returns the registry.

    Raises:
        ClusterIdConflictException: another cluster uses the cluster-id.
    """
    registry = ha.job_manager_registry()
    mine = JobManagerRecord.of_this_process(rpc_address, ha.storage_dir, secret)
    check_same_cluster(mine, registry.records(), ha.cluster_id, ha.where())
    registry.register(mine)
    return registry


def _serving(configuration: Configuration, rpc: Any, rest: Any, reporter: Any,
             port_file: str | Path | None, **extra: Any) -> None:
    """Write the port file of a JobManager that serves, and log it."""
    write_port_file(port_file, rpc_port=rpc.port, rest_port=rest.port, **extra,
                    metrics_port=reporter.port if reporter is not None else None)
    log.info("JobManager serving: RPC %s:%d%s, REST %s://%s:%d", configuration.get(JM_BIND_HOST),
             rpc.port, " (TLS)" if is_internal_ssl_enabled(configuration) else "",
             rest_scheme(configuration), configuration.get(REST_BIND_ADDRESS), rest.port)


async def _stop_all(started: list[Any]) -> None:
    for component in reversed(started):
        await component.stop()
    started.clear()


async def _lead_once(configuration: Configuration, rpc: Any, secret: str | None,
                     logs: LogDirectory, stop: asyncio.Event, ha: Any,
                     port_file: str | Path | None,
                     application: ApplicationSpec | None = None) -> int | None:
    """One leadership: stand by until granted (or ``stop``), start the components with the
    recovered jobs, publish their addresses, and serve until leadership is lost (their jobs
    are then suspended: stopped without a result, so the next leader runs them) or ``stop``.

    An application cluster's leader runs the application (again, after a failover: its jobs
    keep their ids, ``_lead_application``); returns its exit code once it ended, else None."""
    events = LeadershipEvents(asyncio.get_running_loop())
    election = ha.leader_election_service()
    started: list[Any] = []
    election.start(events)
    try:
        standby = await _standby_rest(configuration, ha, started)
        write_port_file(port_file, rpc_port=rpc.port, leader=False,
                        rest_port=standby.port if standby is not None else None)
        log.info("JobManager standing by for leadership (%s %s), RPC %s:%d", ha.kind,
                 ha.directory, configuration.get(JM_BIND_HOST), rpc.port)
        session = await unless_stopped(events.granted, stop)
        if session is None:
            return None
        await _stop_all(started)  # the standby's REST: the leader's binds its port
        log.info("JobManager leads (session %s)", session)
        rest, reporter, addresses, dispatcher = await _start_components(
            configuration, rpc, secret, logs, stop, ha, started, leader_id=session,
            leadership_check=_leadership_check(election, session))
        if not election.confirm_leadership(session, LeaderInformation(session, addresses)):
            log.warning("leadership was lost before it could be confirmed")
            return None
        _serving(configuration, rpc, rest, reporter, port_file, leader=True)
        if application is not None:
            ended = await _lead_application(application, dispatcher, configuration, stop, ha,
                                            events.lost)
            if ended is not None:
                return ended
        else:
            await unless_stopped(events.lost.wait(), stop)
        if events.lost.is_set():
            write_port_file(port_file, rpc_port=rpc.port, leader=False)
            log.warning("JobManager lost its leadership (%s): its jobs are suspended; standing "
                        "by again", events.why_lost)
    finally:
        if not stop.is_set():
            log.info("JobManager leaving leadership")
        else:
            log.info("JobManager stopping")
        await _stop_all(started)
        # may wait for ZooKeeper (releasing the latch after an outage): not on the event loop
        await asyncio.to_thread(election.stop)
    return None


async def _lead_application(application: ApplicationSpec, dispatcher: Any,
                            configuration: Configuration, stop: asyncio.Event, ha: Any,
                            lost: asyncio.Event) -> int | None:
    """Run the application as this leadership's ``ApplicationDispatcherBootstrap``: unless an
    earlier leader recorded its end, run main() with job ids derived from the cluster-id, so
    the jobs an earlier leader submitted are followed, not run again. Returns the exit code once
    it ended (recorded for the standbys, ``ApplicationStatusStore``); None when leadership was
    lost first (main()'s thread is abandoned; its Dispatcher calls fail from now on)."""
    from flintlock.client.application import ApplicationStatus, run_application
    from flintlock.runtime.highavailability.application_status_store import ApplicationStatusStore

    store = ApplicationStatusStore(ha.directory)
    recorded = await asyncio.to_thread(store.read)
    if recorded is not None:
        log.info("The application ended under an earlier leader (%s, jobs %s): not running it "
                 "again", recorded.status, recorded.jobs)
        stop.set()
        return ApplicationStatus[recorded.status].exit_code
    interrupted = asyncio.Event()
    watch = asyncio.ensure_future(_first_of(lost, stop, interrupted))
    try:
        result = await run_application(application, dispatcher, configuration, interrupted,
                                       application_id=ha.cluster_id)
    finally:
        watch.cancel()
    if result is None:
        if stop.is_set():  # told to stop (SIGTERM, Ctrl-C on the client): as without HA
            log.info("Application stopped before it finished")
            return ApplicationStatus.CANCELED.exit_code
        log.warning("The application's run was interrupted (leadership lost); the next leader "
                    "runs it again")
        return None
    try:
        await asyncio.to_thread(store.write, result.status.name, result.jobs)
    except OSError as exc:  # its standbys would run main() again, with the same job ids
        log.error("Could not record the application's status in %s: %s", store.uri, exc)
    return await _application_ended(result, configuration, stop)


async def _first_of(lost: asyncio.Event, stop: asyncio.Event, interrupted: asyncio.Event) -> None:
    await unless_stopped(lost.wait(), stop)
    interrupted.set()


def _leadership_check(election: Any, session: str) -> LeadershipCheck:
    def check() -> None:
        if not election.verify_leadership(session):
            raise LeadershipLostException(
                f"this JobManager no longer leads (session {session}); a newer leader owns "
                "its jobs")

    return check


async def _standby_rest(configuration: Configuration, ha: Any, started: list[Any]) -> Any:
    """A standby's REST server on ``rest.port``, redirecting to the leader's
    (``runtime/rest/standby.py``), with the retrieval service it follows, both appended to
    ``started``; None when the port is taken (the leader on this host serves it)."""
    from flintlock.runtime.rest.server import RestServer, server_options
    from flintlock.runtime.rest.standby import create_standby_app

    watcher = LeaderAddressWatcher("rest", asyncio.get_running_loop())
    retrieval = ha.leader_retrieval_service()
    retrieval.start(watcher)
    started.append(_Stoppable(retrieval.stop))
    server = RestServer(create_standby_app(lambda: watcher.address),
                        host=configuration.get(REST_BIND_ADDRESS), port=configuration.get(REST_PORT),
                        **server_options(configuration))
    try:
        await server.start()
    except OSError as exc:
        log.info("standby REST not served (%s); the leader's serves the port", exc)
        return None
    started.append(server)
    return server


def _resource_manager(configuration: Configuration, rpc: Any, leader_id: str) -> ResourceManager:
    """The standalone ResourceManager, or with ``resourcemanager.type: active`` one that starts
    TaskManager processes on this host as jobs need slots."""
    if configuration.get(RM_TYPE) != "active":
        return ResourceManager(rpc, configuration, leader_id=leader_id)
    from flintlock.runtime.resourcemanager.active.active_resource_manager import (
        ActiveResourceManager,
    )
    from flintlock.runtime.resourcemanager.active.process_driver import (
        ProcessResourceManagerDriver,
    )

    # its TaskManagers share this host: more slots than cores would oversubscribe it
    return ActiveResourceManager(
        rpc, configuration, ProcessResourceManagerDriver(configuration),
        configuration.get(JM_RPC_ADDRESS), rpc.port, leader_id=leader_id,
        worker_prefix=f"taskmanager-{secrets.token_hex(3)}", default_max_slots=os.cpu_count())


class _Stoppable:
    """``stop()`` for a synchronous stop function (``_stop_all``)."""

    def __init__(self, stop: Any) -> None:
        self._stop = stop

    async def stop(self) -> None:
        self._stop()


async def _start_components(configuration: Configuration, rpc: Any, secret: str | None,
                            logs: LogDirectory, stop: asyncio.Event, ha: Any,
                            started: list[Any], leader_id: str = DEFAULT_LEADER_ID,
                            leadership_check: LeadershipCheck | None = None,
                            wrap_gateway: Any = None,
                            ) -> tuple[Any, Any, dict[str, str], Any]:
    """Start the ResourceManager, the Dispatcher (with the recovered jobs under high
    availability), REST and the metrics reporter, appending each to ``started``; returns REST,
    the reporter, the leader addresses of the components and the DispatcherGateway. ``leader_id`` (the leadership's
    session id) is the fencing token of the ResourceManager, Dispatcher and JobMasters;
    ``leadership_check`` guards what they publish."""
    resource_manager = _resource_manager(configuration, rpc, leader_id)
    await resource_manager.start()  # an active one starts its first TaskManagers now
    started.append(resource_manager)
    # REST's modules (~0.3-0.5 s) load in a thread, so the loop goes on meanwhile: an active
    # ResourceManager's first TaskManager processes start now, not after the imports
    await asyncio.to_thread(importlib.import_module, "flintlock.runtime.rest.app")
    from flintlock.runtime.rest.app import create_app
    from flintlock.runtime.rest.server import RestServer, server_options

    persistence = recovered = None
    if ha is not None:
        persistence = JobPersistence(ha.job_graph_store(), ha.job_result_store(),
                                     ha.job_event_store())
        recovered = await asyncio.to_thread(persistence.recover)
    dispatcher = Dispatcher(rpc, configuration, resource_manager.address,
                            on_shutdown_requested=stop.set, persistence=persistence,
                            recovered=recovered, leader_id=leader_id,
                            leadership_check=leadership_check)
    await dispatcher.start()
    started.append(dispatcher)
    gateway = await rpc.connect(dispatcher.address, DispatcherGateway, fencing_token=leader_id)
    if wrap_gateway is not None:  # a per-job cluster's MiniDispatcher
        gateway = wrap_gateway(gateway)
    rest = RestServer(create_app(gateway, configuration, secret=secret, job_manager_logs=logs,
                                 high_availability=ha.describe if ha is not None else None),
                      host=configuration.get(REST_BIND_ADDRESS), port=configuration.get(REST_PORT),
                      **server_options(configuration))
    await rest.start()
    started.append(rest)
    reporter = await start_prometheus_reporter(configuration, [job_manager_source(gateway)])
    if reporter is not None:
        started.append(reporter)
    addresses = {"resourcemanager": resource_manager.address, "dispatcher": dispatcher.address,
                 "rest": f"{rest_scheme(configuration)}://{configuration.get(REST_ADDRESS)}:"
                         f"{rest.port}"}
    return rest, reporter, addresses, gateway
