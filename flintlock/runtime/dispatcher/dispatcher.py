"""Dispatcher: accepts jobs, runs one JobMaster per job, keeps finished jobs queryable.

Follows Flink ``runtime/dispatcher/Dispatcher`` with ``JobManagerRunner`` per job and the
``ExecutionGraphInfoStore`` for completed jobs. While a job's JobMaster is starting the job is
INITIALIZING; afterwards queries are forwarded to the JobMaster; once it reports a terminal state the
Dispatcher keeps the archived graph and the JobResult (bounded by ``max_completed_jobs``) and stops
the JobMaster.

The Dispatcher only awaits JobMaster and ResourceManager gateways, never the reverse (JobMasters
report termination through a callback posted to the Dispatcher's mailbox), so calls cannot deadlock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from flintlock.config import Configuration, options
from flintlock.config.sensitive import JOB_EXCLUDED_KEYS, job_configuration
from flintlock.runtime.clock import Clock
from flintlock.runtime.dispatcher.collect_coordinator import CollectCoordinator
from flintlock.runtime.dispatcher.exceptions import (
    DuplicateJobSubmissionException,
    FlinkJobNotFoundException,
    JobSubmissionException,
)
from flintlock.runtime.dispatcher.gateway import ClusterOverview
from flintlock.runtime.dispatcher.job_persistence import (
    JobPersistence,
    RecoveredJobs,
    archived_from_entry,
)
from flintlock.runtime.dispatcher.savepoint_operations import SavepointOperations
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecutionGraph,
    ExceptionHistoryEntry,
    JobDetails,
    JobResult,
)
from flintlock.runtime.highavailability.leader import LeadershipCheck, LeadershipLostException
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.io_executor import io_executor
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import JobStatus, JobType
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.logs.files import LogChunk, LogInfo
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.gateway import (
    ResourceManagerGateway,
    ResourceOverview,
    TaskManagerInfo,
)
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID, Deferred, FencedRpcEndpoint
from flintlock.runtime.rpc.messages import ACK, Acknowledge
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.shuffle.layout import release_partitions
from flintlock.runtime.shuffle.pipelined import collect_root, default_pipelined_root
from flintlock.runtime.taskmanager.task_execution_state import SerializedError
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = ["COLLECT_RETENTION_S", "Dispatcher", "JobManagerRunner"]

log = logging.getLogger(__name__)

#: how long a terminal job's unread collect results wait for their client (seconds)
COLLECT_RETENTION_S = 300.0

JobMasterFactory = Callable[..., Any]


def _default_job_master_factory(**kwargs: Any) -> Any:
    from flintlock.runtime.jobmaster.job_master import JobMaster

    return JobMaster(**kwargs)


def _releasable_sinks(job_graph: JobGraph) -> list[Any]:
    return [sink for vertex in job_graph.vertices for sink in vertex.sinks
            if callable(getattr(sink, "release", None))]


def _release_sinks(job_id: JobID, sinks: list[Any]) -> None:
    """I/O thread: a FINISHED job's result is recorded, so its sinks drop what kept its commit
    recoverable (``FileSink.release``: the ``_COMMITTING`` marker and the temporary directory).
    Failures are logged, never raised."""
    for sink in sinks:
        try:
            sink.release(str(job_id))
        except Exception:
            log.warning("job %s: releasing sink %r failed", job_id, sink, exc_info=True)


@dataclass
class JobManagerRunner:
    """One submitted job while it runs: its JobGraph, JobMaster and gateway."""

    job_graph: JobGraph
    job_master: Any
    submitted_ms: int
    gateway: JobMasterGateway | None = None
    cancel_requested: bool = False
    start_error: SerializedError | None = None
    timestamps: dict[str, int] = field(default_factory=dict)

    def initializing_snapshot(self) -> ArchivedExecutionGraph:
        jg = self.job_graph
        state = JobStatus.CANCELLING if self.cancel_requested else JobStatus.INITIALIZING
        return ArchivedExecutionGraph(
            job_id=jg.job_id, name=jg.name, job_type=jg.job_type, state=state,
            state_timestamps=dict(self.timestamps), vertices=(), plan=jg.plan,
            configuration=jg.configuration,
        )


class Dispatcher(FencedRpcEndpoint):
    """The DispatcherGateway endpoint.

    Fenced (Flink's ``DispatcherId``): it accepts calls carrying ``leader_id`` only; its
    JobMasters and its calls to the ResourceManager use the same leader id (one leadership for
    the JobManager's components, as Flink 1.15+'s multiple-component leader election).

    Args:
        rpc_service: where JobMasters are registered.
        configuration: the cluster configuration; each job's own settings override it.
        resource_manager_address: the ResourceManager's RPC address.
        clock: time source.
        job_master_factory: builds a JobMaster from keyword arguments (tests replace it).
        max_completed_jobs: how many finished jobs stay queryable (oldest dropped first).
        on_shutdown_requested: called when a client asks to shut the cluster down.
        persistence: with high availability, the JobGraph store and JobResultStore
            (``job_persistence``): jobs are stored before they start and their results recorded.
        recovered: with high availability, what this leader recovered: its jobs start with the
            Dispatcher, unreadable ones are listed as FAILED, finished ones as they ended.
        leader_id: the JobManager's leader session id (``DEFAULT_LEADER_ID`` without high
            availability).
        leadership_check: with high availability, confirms that this JobManager still leads
            (raises ``LeadershipLostException``); the JobMasters run it before publishing
            output, the Dispatcher before recording a job's result.
    """

    def __init__(
        self,
        rpc_service: RpcService,
        configuration: Configuration,
        resource_manager_address: str,
        clock: Clock | None = None,
        job_master_factory: JobMasterFactory | None = None,
        max_completed_jobs: int = 1000,
        on_shutdown_requested: Callable[[], None] | None = None,
        endpoint_id: str = "dispatcher",
        persistence: JobPersistence | None = None,
        recovered: RecoveredJobs | None = None,
        leader_id: str = DEFAULT_LEADER_ID,
        leadership_check: LeadershipCheck | None = None,
    ) -> None:
        super().__init__(endpoint_id, clock, fencing_token=leader_id)
        self._leadership_check = leadership_check
        self._rpc = rpc_service
        self._configuration = configuration
        self._rm_address = resource_manager_address
        self._job_master_factory = job_master_factory or _default_job_master_factory
        self._max_completed = max_completed_jobs
        self._on_shutdown_requested = on_shutdown_requested
        self._running: dict[JobID, JobManagerRunner] = {}
        self._completed: OrderedDict[JobID, tuple[ArchivedExecutionGraph, JobResult]] = OrderedDict()
        #: FINISHED jobs whose sinks still release what kept their commit recoverable
        self._releasing: set[JobID] = set()
        #: set once a job's result can be handed out (``request_job_result`` with a timeout)
        self._result_ready: dict[JobID, asyncio.Event] = {}
        self._savepoints = SavepointOperations()
        #: JobMasters of finished jobs that are still stopping (awaited in ``on_stop``)
        self._stopping: dict[JobID, Any] = {}
        #: collect coordinators of STREAMING jobs' ``execute_and_collect`` by (job, sink uid)
        self._collect: dict[tuple[JobID, str], CollectCoordinator] = {}
        self._persistence = persistence
        self._recovered = recovered
        #: how often each recovered job was recovered by a new leader (high availability)
        self._recoveries: dict[JobID, int] = dict(recovered.recoveries) if recovered else {}
        rpc_service.register(self)

    async def on_start(self) -> None:
        recovered, self._recovered = self._recovered, None
        if recovered is None:
            return
        for entry in recovered.finished:  # ended under an earlier leader: listed, not run
            self._completed[entry.job_id] = archived_from_entry(entry)
        for job_graph in recovered.job_graphs:
            log.info("Recovering job %s (%s).", job_graph.job_id, job_graph.name)
            try:
                self._start_job(job_graph)
            except JobSubmissionException as exc:
                log.error("Recovered job %s cannot start: %s", job_graph.job_id, exc)
        for job_id, why in recovered.unreadable.items():
            now = self.clock.now_ms()
            runner = JobManagerRunner(_unreadable_graph(job_id), None, now,
                                      timestamps={"INITIALIZING": now})
            runner.start_error = SerializedError.from_exception(JobSubmissionException(why))
            self._running[job_id] = runner
            self._complete_without_job_master(runner, runner.start_error)

    # ---- submission ------------------------------------------------------------------------------

    async def submit_job(self, job_graph: JobGraph) -> Acknowledge:
        job_id = job_graph.job_id
        if job_id in self._running or job_id in self._completed:
            raise DuplicateJobSubmissionException(
                f"Job {job_id} ({job_graph.name!r}) has already been submitted."
            )
        if not job_graph.vertices:
            raise JobSubmissionException(f"Job {job_id} ({job_graph.name!r}) has no vertices.")
        if JOB_EXCLUDED_KEYS & set(job_graph.configuration):
            # a client that put its copy of the cluster secret into the job: never stored/served
            job_graph = dataclasses.replace(
                job_graph, configuration=job_configuration(job_graph.configuration))
        if self._persistence is not None:
            if self._persistence.is_finished(job_id):
                raise DuplicateJobSubmissionException(
                    f"Job {job_id} ({job_graph.name!r}) has already finished (it has an entry "
                    "in the JobResultStore).")
            try:
                self._persistence.persist(job_graph)
            except OSError as exc:
                raise JobSubmissionException(
                    f"Job {job_id}: cannot store its JobGraph for high availability: {exc}"
                ) from None
        self._start_job(job_graph)
        return ACK

    def _start_job(self, job_graph: JobGraph) -> None:
        """Create and start the job's JobMaster.

        Raises:
            JobSubmissionException: the job's configuration is invalid.
        """
        job_id = job_graph.job_id
        try:
            job_conf = self._configuration.copy().add_all(dict(job_graph.configuration))
        except Exception as exc:  # IllegalConfigurationException
            raise JobSubmissionException(f"Job {job_id}: {exc}") from None
        now = self.clock.now_ms()
        job_master = self._job_master_factory(
            job_graph=job_graph,
            configuration=job_conf,
            rpc_service=self._rpc,
            resource_manager_address=self._rm_address,
            on_terminal=lambda archived, result: self.post(self._job_reached_terminal, archived, result),
            clock=self.clock,
            fencing_token=self.fencing_token,
            leadership_check=self._leadership_check,
            job_events=self._persistence.job_events if self._persistence is not None else None,
        )
        runner = JobManagerRunner(job_graph, job_master, now, timestamps={"INITIALIZING": now})
        self._running[job_id] = runner
        log.info("Received job %s (%s).", job_id, job_graph.name)
        self.run_async(job_master.start(), lambda _r, err: self._job_master_started(job_id, err))

    async def _job_master_started(self, job_id: JobID, error: BaseException | None) -> None:
        runner = self._running.get(job_id)
        if runner is None:
            return
        if error is not None:
            runner.start_error = SerializedError.from_exception(error)
            log.error("JobMaster of job %s failed to start: %s", job_id, error)
            self._complete_without_job_master(runner, runner.start_error)
            return
        runner.gateway = await self._rpc.connect(runner.job_master.address, JobMasterGateway,
                                                 fencing_token=self.fencing_token)
        if runner.cancel_requested:
            self.run_async(runner.gateway.cancel())

    def _complete_without_job_master(self, runner: JobManagerRunner, error: SerializedError) -> None:
        jg = runner.job_graph
        now = self.clock.now_ms()
        entry = ExceptionHistoryEntry(error, now)
        archived = ArchivedExecutionGraph(
            job_id=jg.job_id, name=jg.name, job_type=jg.job_type, state=JobStatus.FAILED,
            state_timestamps={**runner.timestamps, "FAILED": now}, vertices=(), plan=jg.plan,
            configuration=jg.configuration, failure=entry, exception_history=(entry,),
        )
        result = JobResult(jg.job_id, jg.name, "FAILED", now - runner.submitted_ms, failure=entry)
        self._job_reached_terminal(archived, result)

    def _job_reached_terminal(self, archived: ArchivedExecutionGraph, result: JobResult) -> None:
        archived = self._with_recoveries(archived)
        runner = self._running.pop(archived.job_id, None)
        self._completed[archived.job_id] = (archived, result)
        while len(self._completed) > self._max_completed:
            self._completed.popitem(last=False)
        log.info("Job %s (%s) reached terminal state %s.", archived.job_id, archived.name,
                 archived.state.name)
        if self._persistence is not None and archived.state.is_globally_terminal():
            try:
                if self._leadership_check is not None:
                    self._leadership_check()
                self._persistence.job_terminated(archived, result)
            except LeadershipLostException as exc:  # the job is the newer leader's
                log.warning("the result of job %s is not recorded: %s", archived.job_id, exc)
            except Exception:  # the next leader finishes the cleanup of a dirty entry
                log.exception("recording the result of job %s failed", archived.job_id)
        sinks = _releasable_sinks(runner.job_graph) if runner is not None else []
        if archived.state is JobStatus.FINISHED and sinks:
            # storage work runs off the loop; the result is handed out once it is done, so a
            # client that got it finds the output as it stays
            job_id = archived.job_id
            self._releasing.add(job_id)
            released = asyncio.wrap_future(io_executor().submit(_release_sinks, job_id, sinks))
            released.add_done_callback(lambda _: self._result_released(job_id))
        else:
            self._result_released(archived.job_id)
        if archived.job_type is JobType.STREAMING:
            self.schedule(COLLECT_RETENTION_S, self._release_collect, archived.job_id,
                          self._collect_root(archived.job_id, archived.configuration))
        if runner is not None and runner.start_error is None:
            job_id = archived.job_id
            self._stopping[job_id] = runner.job_master
            self.run_async(runner.job_master.stop(),
                           lambda _r, _e: self._stopping.pop(job_id, None))

    # ---- queries ---------------------------------------------------------------------------------

    def _lookup(self, job_id: JobID) -> JobManagerRunner | tuple[ArchivedExecutionGraph, JobResult]:
        if job_id in self._running:
            return self._running[job_id]
        if job_id in self._completed:
            return self._completed[job_id]
        raise FlinkJobNotFoundException(job_id)

    async def request_job(self, job_id: JobID) -> ArchivedExecutionGraph:
        entry = self._lookup(job_id)
        if isinstance(entry, tuple):
            return entry[0]
        if entry.gateway is None:
            return self._with_recoveries(entry.initializing_snapshot())
        return self._with_recoveries(await entry.gateway.request_job())

    def _with_recoveries(self, archived: ArchivedExecutionGraph) -> ArchivedExecutionGraph:
        count = self._recoveries.get(archived.job_id, 0)
        return dataclasses.replace(archived, recoveries=count) if count else archived

    async def request_job_status(self, job_id: JobID) -> JobStatus:
        entry = self._lookup(job_id)
        if isinstance(entry, tuple):
            return entry[0].state
        if entry.gateway is None:
            return JobStatus.CANCELLING if entry.cancel_requested else JobStatus.INITIALIZING
        return await entry.gateway.request_job_status()

    def _result_released(self, job_id: JobID) -> None:
        self._releasing.discard(job_id)
        ready = self._result_ready.pop(job_id, None)
        if ready is not None:
            ready.set()

    async def request_job_result(self, job_id: JobID,
                                 timeout_s: float = 0.0) -> JobResult | None | Deferred:
        """The JobResult of a globally terminal job whose sinks released what they kept for
        recovery (``FileSink.release``); None before that. With ``timeout_s`` (s), a blocking
        query: the answer comes as soon as the result is there, None after ``timeout_s``
        (a ``Deferred`` answer, so the mailbox goes on meanwhile).

        Raises:
            FlinkJobNotFoundException: an unknown job (or one dropped from the history).
        """
        result = self._job_result_now(job_id)
        if result is not None or timeout_s <= 0:
            return result
        ready = self._result_ready.setdefault(job_id, asyncio.Event())

        async def later() -> JobResult | None:
            try:
                await asyncio.wait_for(ready.wait(), timeout_s)
            except TimeoutError:
                pass
            return await self.run_in_mailbox(self._job_result_now, job_id)

        return Deferred(later)

    def _job_result_now(self, job_id: JobID) -> JobResult | None:
        entry = self._lookup(job_id)
        if not isinstance(entry, tuple) or job_id in self._releasing:
            return None
        return entry[1]

    async def list_jobs(self) -> tuple[JobDetails, ...]:
        now = self.clock.now_ms()
        details: list[JobDetails] = []
        for runner in list(self._running.values()):
            if runner.gateway is None:
                snapshot = runner.initializing_snapshot()
            else:
                try:
                    snapshot = await runner.gateway.request_job()
                except Exception:  # the JobMaster may be stopping; show it as last known
                    snapshot = runner.initializing_snapshot()
            details.append(snapshot.details(now))
        details.extend(archived.details(now) for archived, _ in self._completed.values())
        details.sort(key=lambda d: d.start_time, reverse=True)
        return tuple(details)

    async def cancel_job(self, job_id: JobID) -> Acknowledge:
        entry = self._lookup(job_id)
        if isinstance(entry, tuple):
            return ACK
        entry.cancel_requested = True
        if entry.gateway is not None:
            await entry.gateway.cancel()
        return ACK

    async def trigger_savepoint(self, job_id: JobID, target_directory: str | None,
                                cancel_job: bool) -> str:
        """Start a savepoint of a running job; returns the trigger id at once (the outcome:
        ``savepoint_status``). A request the JobMaster refuses (no directory, not RUNNING, a
        BATCH job) is a FAILED operation, as in Flink.

        Raises:
            FlinkJobNotFoundException: no such job.
        """
        return await self._savepoint_operation(
            job_id, lambda gateway: gateway.trigger_savepoint(target_directory, cancel_job))

    async def stop_with_savepoint(self, job_id: JobID, target_directory: str | None,
                                  drain: bool) -> str:
        """Stop a running job with a savepoint (``JobMasterGateway.stop_with_savepoint``);
        the trigger id at once, as ``trigger_savepoint``.

        Raises:
            FlinkJobNotFoundException: no such job.
        """
        return await self._savepoint_operation(
            job_id, lambda gateway: gateway.stop_with_savepoint(target_directory, drain))

    async def _savepoint_operation(self, job_id: JobID,
                                   start: Callable[[Any], Awaitable[str]]) -> str:
        entry = self._lookup(job_id)
        op = self._savepoints.start(job_id)
        if isinstance(entry, tuple) or entry.gateway is None:
            op.status, op.failure = "FAILED", f"job {job_id} is not running"
            return op.trigger_id
        gateway = entry.gateway
        try:
            op.location = await start(gateway)
        except Exception as exc:
            op.status, op.failure = "FAILED", str(exc)
            return op.trigger_id

        async def status() -> tuple[str, str]:
            return await gateway.savepoint_status(op.location)

        async def written() -> bool:
            return await asyncio.to_thread(_has_metadata, op.location)

        deadline = self._configuration.get(options.CHECKPOINTING_TIMEOUT) + 60.0
        self.run_async(self._savepoints.follow(op, status, written, deadline))
        return op.trigger_id

    async def savepoint_status(self, job_id: JobID, trigger_id: str) -> dict[str, Any]:
        """Flink's ``AsynchronousOperationResult`` of savepoint ``trigger_id``.

        Raises:
            UnknownOperationException: no such trigger id for this job.
        """
        return self._savepoints.get(job_id, trigger_id).to_json()

    async def request_cluster_overview(self) -> ClusterOverview:
        resources = await self._resource_overview()
        counts = {JobStatus.FINISHED: 0, JobStatus.CANCELED: 0, JobStatus.FAILED: 0}
        for archived, _ in self._completed.values():
            if archived.state in counts:
                counts[archived.state] += 1
        return ClusterOverview(
            resources=resources,
            jobs_running=len(self._running),
            jobs_finished=counts[JobStatus.FINISHED],
            jobs_cancelled=counts[JobStatus.CANCELED],
            jobs_failed=counts[JobStatus.FAILED],
        )

    async def _resource_manager(self) -> ResourceManagerGateway:
        return await self._rpc.connect(self._rm_address, ResourceManagerGateway,
                                       fencing_token=self.fencing_token)

    async def _resource_overview(self) -> ResourceOverview:
        rm = await self._resource_manager()
        return await rm.request_resource_overview()

    async def request_task_manager_infos(self) -> tuple[TaskManagerInfo, ...]:
        rm = await self._resource_manager()
        return await rm.request_task_manager_infos()

    async def request_task_manager_log_list(self, resource_id: ResourceID) -> tuple[LogInfo, ...]:
        rm = await self._resource_manager()
        return await rm.request_task_manager_log_list(resource_id)

    async def request_task_manager_log(self, resource_id: ResourceID, name: str | None,
                                       start: int, count: int) -> LogChunk:
        rm = await self._resource_manager()
        return await rm.request_task_manager_log(resource_id, name, start, count)

    async def request_task_manager_metrics(self, resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        rm = await self._resource_manager()
        return await rm.request_task_manager_metrics(resource_id)

    async def request_task_manager_thread_dump(self, resource_id: ResourceID,
                                               max_depth: int) -> tuple[ThreadInfo, ...]:
        rm = await self._resource_manager()
        return await rm.request_task_manager_thread_dump(resource_id, max_depth)

    # ---- execute_and_collect of STREAMING jobs ----------------------------------------------------

    async def deliver_coordination_request(self, job_id: JobID, operator_id: str,
                                           request: dict[str, Any]) -> dict[str, Any]:
        """Answer a collect client (Flink ``DispatcherGateway.deliverCoordinationRequestToCoordinator``
        for the ``CollectSinkOperatorCoordinator``).

        Args:
            operator_id: the collect sink's uid.
            request: ``{"offset": n}``, the batches the client received so far.

        Returns:
            ``CollectResponse.to_json()`` plus ``"jobStatus"``.

        Raises:
            FlinkJobNotFoundException: no such job.
            ValueError: a malformed request or an offset outside what was handed out.
        """
        offset = request.get("offset") if isinstance(request, dict) else None
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"a collect request needs {{'offset': <int >= 0>}}, got {request!r}")
        if not operator_id or "/" in operator_id or operator_id.startswith("."):
            raise ValueError(f"invalid collect sink id {operator_id!r}")
        entry = self._lookup(job_id)
        if isinstance(entry, tuple):
            status, configuration = entry[0].state, entry[0].configuration
        else:
            status = await self.request_job_status(job_id)
            configuration = entry.job_graph.configuration
        key = (job_id, operator_id)
        coordinator = self._collect.get(key)
        if coordinator is None:
            coordinator = self._collect[key] = CollectCoordinator(
                f"{self._collect_root(job_id, configuration)}/{operator_id}")
        response = await asyncio.to_thread(coordinator.fetch, offset,
                                           status is JobStatus.FINISHED)
        if response.end and offset == response.offset + len(response.batches):
            self._collect.pop(key, None)  # the client has everything
            await asyncio.to_thread(coordinator.release)
        return {**response.to_json(), "jobStatus": status.name}

    def _collect_root(self, job_id: JobID, job_configuration: Any) -> str:
        """Where the job's collect sinks write (the JobMaster's PIPELINED root, same process)."""
        conf = self._configuration.copy().add_all(dict(job_configuration))
        return collect_root(conf.get(options.SHUFFLE_DIR) or default_pipelined_root(), job_id)

    def _release_collect(self, job_id: JobID, root: str) -> None:
        """Drop a terminal job's collect coordinators and the results nobody fetched."""
        for key in [k for k in self._collect if k[0] == job_id]:
            del self._collect[key]
        self.run_async(asyncio.to_thread(release_partitions, [root]))

    async def shutdown_cluster(self) -> Acknowledge:
        if self._on_shutdown_requested is not None:
            self._on_shutdown_requested()
        return ACK

    async def on_stop(self) -> None:
        # running jobs' JobMasters, and finished jobs' JobMasters whose stop is still under way
        # (a background stop would be cancelled with this endpoint and leave a mailbox behind)
        masters = [r.job_master for r in self._running.values() if r.gateway is not None]
        masters += list(self._stopping.values())
        for job_master in masters:
            try:
                await job_master.stop()
            except Exception:  # best effort while shutting down
                log.exception("stopping JobMaster %s failed", getattr(job_master, "address", "?"))
        self._rpc.unregister(self)


def _unreadable_graph(job_id: JobID) -> JobGraph:
    """A stand-in for a stored JobGraph that could not be read (listed as FAILED)."""
    return JobGraph(job_id, f"(unrecoverable job {job_id})", JobType.BATCH, ())


def _has_metadata(location: str) -> bool:
    """Whether a savepoint's ``_metadata`` exists at ``location`` (it completed)."""
    from flintlock.runtime.checkpoint.storage import read_checkpoint

    try:
        read_checkpoint(location)
    except (OSError, ValueError):
        return False
    return True
