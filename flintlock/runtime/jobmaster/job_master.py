"""JobMaster: the RPC endpoint that runs one job (Flink ``JobMaster``); a thin async shell.

All decisions live in the pure ``DefaultScheduler`` core; this endpoint turns RPCs, timers and
finished background work into scheduler events on its mailbox and carries out the returned commands
(RPCs to TaskExecutors and the ResourceManager, sink commit/abort in worker threads, timers).

Start-up (``on_start``): build the ExecutionGraph, then in a worker thread ``sink.prepare(job_id)``
for every sink and ``source.enumerate_splits(parallelism)`` for every source vertex, register at the
ResourceManager, and start scheduling (job CREATED -> RUNNING). At the end: partitions released,
slots freed, ``disconnect_job_manager`` at the RM and the TaskExecutors, then
``on_terminal(archived_graph, job_result)``. The ResourceManager connection and the heartbeats
live in ``connections`` (a mixin), the checkpoint RPCs in ``checkpoint_rpcs``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from flintlock.config import options
from flintlock.config.batch_execution_options import SPECULATIVE_ENABLED
from flintlock.config.configuration import Configuration
from flintlock.runtime.checkpoint import storage as checkpoint_storage
from flintlock.runtime.checkpoint.coordinator import CheckpointSettings
from flintlock.runtime.checkpoint.snapshots import CompletedCheckpoint
from flintlock.runtime.checkpoint.stats import snapshot_stats
from flintlock.runtime.clock import Clock
from flintlock.runtime.executiongraph.archived import (
    ArchivedExecutionGraph,
    ArchivedJobVertex,
    ExceptionHistoryEntry,
    JobResult,
)
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.heartbeat.heartbeat_manager import (
    UnreachableTargets,
    heartbeat_settings,
    rpc_failure_threshold,
)
from flintlock.runtime.highavailability.job_event_store import FileSystemJobEventStore
from flintlock.runtime.highavailability.leader import LeadershipCheck
from flintlock.runtime.ids import AllocationID, ExecutionVertexID, JobVertexID, ResourceID
from flintlock.runtime.io_executor import SerialExecutor, io_executor
from flintlock.runtime.jobgraph.job_graph import JobGraph
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus, JobType
from flintlock.runtime.jobmaster.batch_recovery import BatchJobEvents, RecordedBatchJob
from flintlock.runtime.jobmaster.checkpoint_rpcs import JobMasterCheckpointRpcs
from flintlock.runtime.jobmaster.checkpointing import CheckpointCoordinatorShell
from flintlock.runtime.jobmaster.connections import JobMasterConnections, TaskManagerConnection
from flintlock.runtime.metrics.live_task_metrics import LiveTaskMetrics
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse, ResourceManagerGateway
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID, FencedRpcEndpoint
from flintlock.runtime.rpc.messages import ACK, Acknowledge
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.scheduler.adaptivebatch.adaptive_batch_scheduler import (
    AdaptiveBatchScheduler,
    AutoParallelismSettings,
    dynamic_vertices,
    scheduler_type,
)
from flintlock.runtime.scheduler.adaptivebatch.speculative_scheduler import SpeculativeScheduler
from flintlock.runtime.scheduler.default_scheduler import DefaultScheduler
from flintlock.runtime.scheduler.messages import (
    BlockNodes,
    CancelJob,
    CancelTask,
    CancelTaskFailed,
    Command,
    DeclareResources,
    DeploymentFailed,
    DeployTask,
    Event,
    FailJob,
    FinalizeSinks,
    FreeSlot,
    JobTerminated,
    NotEnoughResources,
    ReleasePartitions,
    ScheduleTimer,
    SinksFinalized,
    SlotLost,
    StartScheduling,
    TaskExecutionStateChanged,
    TaskManagerLost,
)
from flintlock.runtime.shuffle.pipelined import default_pipelined_root, release_job_partitions
from flintlock.runtime.taskexecutor.gateway import SlotOffer, TaskExecutorGateway
from flintlock.runtime.taskmanager.task_execution_state import (
    SerializedError,
    TaskExecutionState,
    TaskResult,
)

__all__ = ["JobMaster", "OnTerminal"]

log = logging.getLogger(__name__)

#: how long a starting JobMaster waits for the ResourceManager's count of Spark servers (s)
CLUSTER_SPARK_TIMEOUT_S = 2.0

#: what ``_prepare_job`` found: source splits, the checkpoint to start from, restored subtasks
#: (a dynamic graph's: the records to replay on the mailbox first)
_Prepared = tuple[dict[JobVertexID, list[list[Any]]], CompletedCheckpoint | None,
                  dict[ExecutionVertexID, TaskResult] | RecordedBatchJob]

OnTerminal = Callable[[ArchivedExecutionGraph, JobResult], None]

class JobMaster(JobMasterConnections, JobMasterCheckpointRpcs, FencedRpcEndpoint):
    """Runs one job; implements ``JobMasterGateway``.

    Args:
        job_graph: the job.
        configuration: the cluster configuration; the job graph's own keys override it.
        rpc_service: where this endpoint is registered and gateways are connected.
        resource_manager_address: RPC address of the ResourceManager.
        on_terminal: called once, in the mailbox, when the job is globally terminal.
        clock: time source (``ManualClock`` in tests).
        endpoint_id: defaults to ``jobmaster-<job id>``.
        fencing_token: its JobMasterId: the JobManager's leader session id
            (``DEFAULT_LEADER_ID`` without high availability). Calls with another token are
            rejected; its calls to TaskExecutors and the ResourceManager carry it.
        leadership_check: with high availability, confirms with the HA store that this
            JobManager still leads (raises ``LeadershipLostException``); run before every sink
            commit and checkpoint metadata write, so a deposed leader publishes nothing.
        job_events: with high availability, the HA storage's job events: a BATCH job with
            ``execution.batch.job-recovery.enabled`` records its finished subtasks there and
            keeps those an earlier leader finished (``batch_recovery``).

    The endpoint registers itself with ``rpc_service`` when constructed (like the other endpoints)
    and unregisters when stopped; ``start()`` begins the job.
    """

    def __init__(
        self,
        job_graph: JobGraph,
        configuration: Configuration,
        rpc_service: RpcService,
        resource_manager_address: str,
        on_terminal: OnTerminal | None = None,
        clock: Clock | None = None,
        endpoint_id: str | None = None,
        fencing_token: str = DEFAULT_LEADER_ID,
        leadership_check: LeadershipCheck | None = None,
        job_events: FileSystemJobEventStore | None = None,
    ) -> None:
        super().__init__(endpoint_id or f"jobmaster-{job_graph.job_id}", clock,
                         fencing_token=fencing_token)
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.cluster_configuration = configuration
        self.rpc_service = rpc_service
        self.resource_manager_address = resource_manager_address
        self.on_terminal = on_terminal
        self._leadership_check = leadership_check
        self.batch_events = BatchJobEvents(job_events, job_graph,
                                           configuration.get(options.SHUFFLE_DIR) or "") if (
            job_events is not None and job_graph.job_type is JobType.BATCH
            and configuration.get(options.BATCH_JOB_RECOVERY)) else None
        self.resource_id = ResourceID(f"jobmaster-{job_graph.job_id}")
        self._initialized_ms = self.clock.now_ms()
        self.configuration = configuration
        self.graph: ExecutionGraph | None = None
        self.scheduler: DefaultScheduler | None = None
        #: set once the job is globally terminal
        self.job_result: JobResult | None = None
        self._archived_without_graph: ArchivedExecutionGraph | None = None
        self._task_managers: dict[ResourceID, TaskManagerConnection] = {}
        self._te_gateways: dict[str, TaskExecutorGateway] = {}
        self._rm: ResourceManagerGateway | None = None
        self._rm_connecting = False
        self._rm_last_heartbeat: float | None = None
        #: the latest requirement ((profile, count) pairs) and the last one the RM acknowledged
        self._wanted_slots: tuple[tuple[Any, int], ...] | None = None
        self._declared_slots: tuple[tuple[Any, int], ...] | None = None
        self._declaring = False
        self._termination: asyncio.Future[JobResult] | None = None
        #: where the job's PIPELINED partitions live (STREAMING jobs), released at the end
        self._pipelined_root = ""
        #: checkpoints and savepoints of a STREAMING job (None for BATCH)
        self.checkpointing: CheckpointCoordinatorShell | None = None
        #: sink commits/aborts and checkpoint storage run here, one at a time and in order, on
        #: the process's I/O pool (no thread starts on the loop)
        self._io_executor = SerialExecutor()
        #: in-flight RPCs to other endpoints (awaited briefly on stop)
        self._outgoing: set[asyncio.Task[Any]] = set()
        self._heartbeat_interval, self._heartbeat_timeout = heartbeat_settings(configuration)
        self._unreachable: UnreachableTargets[ResourceID] = UnreachableTargets(
            rpc_failure_threshold(configuration))
        rpc_service.register(self)

    # ---- life cycle ----------------------------------------------------------------------------

    async def on_start(self) -> None:
        self._termination = asyncio.get_running_loop().create_future()
        try:
            self.configuration = self.cluster_configuration.copy().add_all(self.job_graph.configuration)
            adaptive = scheduler_type(self.job_graph, self.configuration) == "AdaptiveBatch"
            auto = AutoParallelismSettings.from_configuration(self.configuration)
            self.graph = ExecutionGraph(
                self.job_graph,
                self.clock.now_ms,
                self.configuration.get(options.ATTEMPTS_HISTORY),
                initialization_timestamp_ms=self._initialized_ms,
                dynamic_vertices=dynamic_vertices(self.job_graph, auto) if adaptive else None,
            )
            if self.job_graph.job_type is JobType.STREAMING:
                self._pipelined_root = (self.configuration.get(options.SHUFFLE_DIR)
                                        or default_pipelined_root())
                settings = CheckpointSettings.from_configuration(
                    self.configuration, f"{self._pipelined_root.rstrip('/')}/checkpoints")
                # savepoints work without periodic checkpoints too
                self.checkpointing = CheckpointCoordinatorShell(self, settings, self.run_io)
            if adaptive:
                kind = (SpeculativeScheduler if self.configuration.get(SPECULATIVE_ENABLED)
                        else AdaptiveBatchScheduler)
                self.scheduler = kind(self.graph, self.configuration, self.clock, auto)
                if self.batch_events is not None:  # a new leader rebuilds the same graph
                    self.batch_events.record_initializations(self.scheduler, self.run_io)
            else:
                if self.configuration.get(SPECULATIVE_ENABLED):
                    log.info("job %s: speculative execution needs the AdaptiveBatchScheduler "
                             "(a BATCH job with BLOCKING exchanges); it runs without it",
                             self.job_id)
                self.scheduler = DefaultScheduler(self.graph, self.configuration, self.clock,
                                                  pipelined_root=self._pipelined_root,
                                                  checkpoints=self.checkpointing)
        except Exception as exc:
            log.exception("job %s: cannot build the execution graph", self.job_id)
            self._fail_without_graph(exc)
            return
        log.info("Starting JobMaster for job %s (%s).", self.job_graph.name, self.job_id)
        self.run_async(self._prepare(), self._on_prepared)
        self._connect_to_resource_manager()
        self.schedule(self._heartbeat_interval, self._heartbeat_tick)

    async def _prepare(self) -> _Prepared:
        """Bound an AdaptiveBatch job's automatic parallelism by the cluster's Spark servers
        (before its sources are sized), then ``_prepare_job`` on a worker thread."""
        scheduler = self.scheduler
        if isinstance(scheduler, AdaptiveBatchScheduler) and scheduler.settings.enabled:
            servers = await self._cluster_spark_servers()
            if servers is not None:
                scheduler.settings = dataclasses.replace(scheduler.settings,
                                                         cluster_spark_servers=servers)
                log.info("job %s: automatically sized vertices get at most %d subtask(s) (the "
                         "Spark servers of the cluster's TaskManagers)", self.job_id,
                         servers)
        return await asyncio.to_thread(self._prepare_job)

    async def _cluster_spark_servers(self) -> int | None:
        """The Spark servers of the cluster's TaskManagers now
        (``ResourceOverview.spark_servers``), or None when unknown: none registered, one on an
        unknown Spark, or the ResourceManager did not answer within ``CLUSTER_SPARK_TIMEOUT_S``."""
        async def ask() -> Any:
            gateway = await self.rpc_service.connect(
                self.resource_manager_address, ResourceManagerGateway,
                fencing_token=self.fencing_token)
            return await gateway.request_resource_overview()

        try:
            overview = await asyncio.wait_for(ask(), CLUSTER_SPARK_TIMEOUT_S)
        except Exception as exc:  # an unknown bound is no bound
            log.debug("job %s: no count of the cluster's Spark servers (%s)", self.job_id, exc)
            return None
        servers = int(getattr(overview, "spark_servers", 0) or 0)
        return servers if servers >= 1 else None

    async def stop(self) -> None:
        # let the final calls (free_slot, release_partitions, disconnects) go out before the base
        # class cancels background work; bounded by the RPC timeout
        pending = [t for t in self._outgoing if not t.done()]
        if pending and self.job_result is not None:
            await asyncio.wait(pending, timeout=self.configuration.get(options.RPC_ASK_TIMEOUT))
        try:
            await super().stop()
        finally:
            self.rpc_service.unregister(self)

    async def on_stop(self) -> None:
        self._io_executor.shutdown()
        if self.job_result is None and self.graph is not None:
            log.info("JobMaster of job %s stopped before the job ended (%s)", self.job_id, self.graph.state.name)

    async def wait_for_termination(self) -> JobResult:
        """The JobResult, once the job is globally terminal."""
        assert self._termination is not None, "JobMaster not started"
        return await asyncio.shield(self._termination)

    def _prepare_job(self) -> _Prepared:
        """Worker thread: prepare every sink, enumerate every source's splits, check that the
        checkpoint directory is writable, find what to start from: the job's newest completed
        checkpoint when it has one (a JobMaster that took the job over after a JobManager
        failover; its sinks already published output, so they are not prepared again), else
        the savepoint given (if any); and with batch job recovery, the subtasks an earlier leader
        finished that are kept (their sinks are not prepared again when all are kept)."""
        job_id = str(self.job_id)
        restored = None
        if self.checkpointing is not None:
            if self.checkpointing.settings.enabled:
                checkpoint_storage.check_writable(self.checkpointing.job_directory)
            restored = checkpoint_storage.latest_checkpoint(self.checkpointing.job_directory)
            path = self.configuration.get(options.SAVEPOINT_PATH)
            if restored is not None:
                log.info("job %s: recovering from its checkpoint %d (%s)", self.job_id,
                         restored.checkpoint_id, restored.external_pointer)
            elif path:
                restored = self.checkpointing.load_savepoint(
                    path, self.configuration.get(options.SAVEPOINT_IGNORE_UNCLAIMED))
        own = restored is not None and restored.job_id == job_id
        kept: dict[ExecutionVertexID, TaskResult] | RecordedBatchJob = {}
        events = self.batch_events
        if events is not None and self.graph is not None and self.scheduler is not None:
            kept = (events.read() if self.graph.dynamic_vertices
                    else events.load(self.graph, self.scheduler.regions))
        for vertex in self.job_graph.vertices:
            if own or (events is not None and kept and (
                    events.fully_recorded(kept, vertex) if isinstance(kept, RecordedBatchJob)
                    else events.fully_restored(kept, vertex))):
                continue  # their output is staged (or being published) already
            for sink in vertex.sinks:
                sink.prepare(job_id)
        splits: dict[JobVertexID, list[list[Any]]] = {}
        for vertex in self.job_graph.vertices:
            if vertex.source is None:
                continue
            parallelism = (self.scheduler.source_parallelism(vertex) if self.scheduler is not None
                           else vertex.parallelism)
            assigned = [list(s) for s in vertex.source.enumerate_splits(parallelism)]
            if len(assigned) != parallelism:
                raise ValueError(
                    f"source of {vertex.name!r} returned splits for {len(assigned)} subtasks, "
                    f"expected {parallelism}"
                )
            splits[vertex.id] = assigned
        return splits, restored, kept

    def _on_prepared(self, prepared: _Prepared | None, error: BaseException | None) -> None:
        if error is not None or prepared is None:
            log.warning("job %s: preparation failed: %s", self.job_id, error)
            self._handle(FailJob(SerializedError.from_exception(
                error or RuntimeError("preparation returned nothing"))))
        else:
            splits, restored, kept = prepared
            if restored is not None and self.checkpointing is not None:
                self.checkpointing.restore_at_start(restored)
            if isinstance(kept, RecordedBatchJob):  # rebuild the dynamic graph first
                assert self.batch_events is not None
                kept = self.batch_events.replay(self.scheduler, splits, kept)
            if kept and self.scheduler is not None:
                self.scheduler.restore_finished(kept)
            self._handle(StartScheduling(splits))
            if self.checkpointing is not None:
                self.checkpointing.start()

    def _fail_without_graph(self, exc: Exception) -> None:
        now = self.clock.now_ms()
        entry = ExceptionHistoryEntry(SerializedError.from_exception(exc, non_recoverable=True), now)
        jg = self.job_graph
        self._archived_without_graph = ArchivedExecutionGraph(
            job_id=jg.job_id,
            name=jg.name,
            job_type=jg.job_type,
            state=JobStatus.FAILED,
            state_timestamps={"INITIALIZING": self._initialized_ms, "FAILED": now},
            vertices=tuple(
                ArchivedJobVertex(v.id, v.name, v.parallelism, v.max_parallelism, v.slot_sharing_group, ())
                for v in jg.vertices
            ),
            plan=dict(jg.plan),
            configuration=dict(jg.configuration),
            failure=entry,
            exception_history=(entry,),
        )
        result = JobResult(jg.job_id, jg.name, "FAILED", max(0, now - self._initialized_ms), {}, entry)
        self._report_terminal(self._archived_without_graph, result)

    # ---- scheduler shell -----------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        if self.scheduler is None:
            return
        self._apply(self.scheduler.handle(event))

    def _apply(self, commands: list[Command]) -> None:
        for command in commands:
            if isinstance(command, DeployTask):
                self._deploy(command)
            elif isinstance(command, CancelTask):
                self._cancel_task(command)
            elif isinstance(command, DeclareResources):
                self._declare(command.resources)
            elif isinstance(command, FreeSlot):
                self._send(
                    self._call_te(command.task_executor_address, "free_slot", command.allocation_id, command.cause),
                    _log_failure(f"free_slot {command.allocation_id}"),
                )
            elif isinstance(command, ReleasePartitions):
                self._send(
                    self._call_te(command.task_executor_address, "release_partitions", self.job_id, command.partition_ids),
                    _log_failure("release_partitions"),
                )
            elif isinstance(command, ScheduleTimer):
                self.schedule(command.delay_s, self._handle, command.event)
            elif isinstance(command, FinalizeSinks):
                self.run_io(functools.partial(self._finalize_sinks, command),
                            self._on_sinks_finalized)
            elif isinstance(command, BlockNodes):
                if self._rm is not None:
                    self._send(self._rm.notify_new_blocked_nodes(
                        command.resource_ids, command.duration_s, command.cause),
                        _log_failure("notify_new_blocked_nodes"))
            elif isinstance(command, JobTerminated):
                self._on_job_terminated(command.result)
            else:  # pragma: no cover
                raise TypeError(f"unknown command {command!r}")

    def _deploy(self, command: DeployTask) -> None:
        attempt = command.tdd.attempt_id

        def done(_: Any, error: BaseException | None) -> None:
            if error is not None:
                log.warning("job %s: deploying %s failed: %s", self.job_id, attempt, error)
                self._handle(DeploymentFailed(attempt, SerializedError.from_exception(error)))

        self._send(self._call_te(command.task_executor_address, "submit_task", command.tdd), done)

    def _cancel_task(self, command: CancelTask) -> None:
        def done(_: Any, error: BaseException | None) -> None:
            if error is not None:
                self._handle(CancelTaskFailed(command.attempt_id, SerializedError.from_exception(error)))

        self._send(self._call_te(command.task_executor_address, "cancel_task", command.attempt_id), done)

    def _finalize_sinks(self, command: FinalizeSinks) -> None:
        """Worker thread: commit or abort every sink (abort is attempted for all, errors re-raised)."""
        job_id = str(self.job_id)
        # a deposed leader neither publishes nor aborts: the newer leader's attempts of this
        # job write under the same job id
        self.check_leadership()
        first_error: BaseException | None = None
        for sink, committables in command.work:
            try:
                if command.commit:
                    sink.commit(job_id, list(committables))
                else:
                    sink.abort(job_id, list(committables))
            except BaseException as exc:
                if command.commit:
                    raise
                first_error = first_error or exc
        if first_error is not None:
            raise first_error

    def _on_sinks_finalized(self, _: Any, error: BaseException | None) -> None:
        self._handle(SinksFinalized(SerializedError.from_exception(error) if error is not None else None))

    def check_leadership(self) -> None:
        """Any thread: raises ``LeadershipLostException`` when this JobManager is known not to
        lead any more (high availability); a no-op without it."""
        if self._leadership_check is not None:
            self._leadership_check()

    def run_io(self, fn: Callable[[], Any],
               on_done: Callable[[Any, BaseException | None], Any]) -> None:
        """Run blocking storage work on the serial I/O executor (sink commits after the
        checkpoint finalizations issued before them); ``on_done`` runs in the mailbox."""
        loop = asyncio.get_running_loop()
        try:
            future = self._io_executor.submit(fn)
        except RuntimeError:  # the job ended and its executor shut down: nothing left to do
            log.debug("job %s: I/O after the job ended dropped: %r", self.job_id, fn)
            return
        self.run_async(asyncio.wrap_future(future, loop=loop), on_done)

    def _send(self, call: Any, on_done: Callable[[Any, BaseException | None], Any]) -> None:
        """Start an RPC in the background; ``on_done`` runs in the mailbox."""
        task = self.run_async(call, on_done)
        self._outgoing.add(task)
        task.add_done_callback(self._outgoing.discard)

    async def _call_te(self, address: str, method: str, *args: Any) -> Any:
        if address not in self._te_gateways:
            gateway: TaskExecutorGateway = await self.rpc_service.connect(
                address, TaskExecutorGateway,
                fencing_token=self.fencing_token)
            self._te_gateways[address] = gateway
        return await getattr(self._te_gateways[address], method)(*args)

    def _on_job_terminated(self, result: JobResult) -> None:
        assert self.graph is not None and self.scheduler is not None
        if self.checkpointing is not None:  # pending checkpoints end as FAILED in the archive
            self.checkpointing.job_terminated(self.graph.state)
        archived = self._archive()
        cause = f"job {self.job_id} reached {self.graph.state.name}"
        if self._rm is not None:
            self._send(self._rm.disconnect_job_manager(self.job_id, cause), _log_failure("disconnect RM"))
        for connection in self._task_managers.values():
            self._send(
                self._call_te(connection.address, "disconnect_job_manager", self.job_id, cause),
                _log_failure("disconnect TaskExecutor"),
            )
        self._task_managers.clear()
        self._report_terminal(archived, result)

    def _report_terminal(self, archived: ArchivedExecutionGraph, result: JobResult) -> None:
        self.job_result = result
        events = self.batch_events
        if events is not None:  # submitted before the shutdown: it still runs
            self.run_io(lambda: events.release_restored_partitions(self.check_leadership),
                        _log_failure("releasing restored partitions"))
        self._io_executor.shutdown()
        if self._pipelined_root:  # submitted now: runs even when this endpoint stops next
            io_executor().submit(release_job_partitions, self._pipelined_root, self.job_id)
        log.info("Job %s (%s) reached %s.", self.job_graph.name, self.job_id, archived.state.name)
        if self._termination is not None and not self._termination.done():
            self._termination.set_result(result)
        if self.on_terminal is not None:
            try:
                self.on_terminal(archived, result)
            except Exception:
                log.exception("job %s: on_terminal callback failed", self.job_id)

    # ---- JobMasterGateway ----------------------------------------------------------------------

    async def update_task_execution_state(self, state: TaskExecutionState) -> Acknowledge:
        if state.job_id != self.job_id or self.scheduler is None:
            return ACK
        if (self.checkpointing is not None and state.state is ExecutionState.FINISHED
                and self.graph is not None
                and self.graph.find_current_execution(state.attempt_id) is not None):
            self.checkpointing.task_finished(state.attempt_id, state.result)
        self._handle(TaskExecutionStateChanged(state))
        if self.batch_events is not None and self.graph is not None:
            self.batch_events.on_report(self.graph, state, self.run_io)
        return ACK

    async def register_task_manager(self, resource_id: ResourceID, task_executor_address: str) -> RegistrationResponse:
        if self.job_result is not None:
            return RegistrationResponse(False, self.resource_id, f"job {self.job_id} has ended")
        connection = self._task_managers.get(resource_id)
        now = self.clock.monotonic()
        if connection is None or connection.address != task_executor_address:
            self._task_managers[resource_id] = TaskManagerConnection(task_executor_address, now)
            log.info("job %s: TaskManager %s registered (%s)", self.job_id, resource_id, task_executor_address)
        else:
            connection.last_heartbeat = now
        return RegistrationResponse(True, self.resource_id)

    async def offer_slots(self, resource_id: ResourceID, offers: tuple[SlotOffer, ...]) -> tuple[SlotOffer, ...]:
        connection = self._task_managers.get(resource_id)
        if connection is None or self.scheduler is None:
            log.warning("job %s: rejecting slot offers of unregistered TaskManager %s", self.job_id, resource_id)
            return ()
        accepted, commands = self.scheduler.offer_slots(resource_id, connection.address, tuple(offers))
        self._apply(commands)
        return accepted

    async def fail_slot(self, resource_id: ResourceID, allocation_id: AllocationID, cause: str) -> None:
        self._handle(SlotLost(resource_id, allocation_id, cause))

    async def heartbeat_from_task_manager(self, resource_id: ResourceID) -> None:
        connection = self._task_managers.get(resource_id)
        if connection is not None:
            connection.last_heartbeat = self.clock.monotonic()

    async def update_task_metrics(self, resource_id: ResourceID,
                                  metrics: tuple[LiveTaskMetrics, ...]) -> None:
        if resource_id not in self._task_managers or self.graph is None:
            return
        for m in metrics:
            execution = self.graph.find_current_execution(m.attempt_id)
            if execution is not None and execution.state is ExecutionState.RUNNING:
                execution.live_metrics = m

    async def heartbeat_from_resource_manager(self, resource_id: ResourceID) -> None:
        self._rm_last_heartbeat = self.clock.monotonic()
        if self._rm is not None:
            self._send(self._rm.heartbeat_from_job_manager(self.resource_id), _log_failure("RM heartbeat"))

    async def notify_not_enough_resources(self, cause: str) -> None:
        self._handle(NotEnoughResources(cause))

    async def disconnect_task_manager(self, resource_id: ResourceID, cause: str) -> None:
        if self._task_managers.pop(resource_id, None) is not None:
            log.info("job %s: TaskManager %s disconnected: %s", self.job_id, resource_id, cause)
        self._handle(TaskManagerLost(resource_id, cause))

    async def request_job(self) -> ArchivedExecutionGraph:
        if self.graph is None or self.scheduler is None:
            if self._archived_without_graph is not None:
                return self._archived_without_graph
            raise RuntimeError(f"job {self.job_id}: JobMaster not started")
        return self._archive()

    def _archive(self) -> ArchivedExecutionGraph:
        """The graph's snapshot with the checkpoint statistics (REST, CLI, job result store)."""
        assert self.graph is not None and self.scheduler is not None
        return replace(
            self.graph.archive(self.clock.now_ms(), self.scheduler.pending_slot_requests()),
            checkpoint_stats=(None if self.checkpointing is None
                              else snapshot_stats(self.checkpointing.coordinator)))

    async def request_job_status(self) -> JobStatus:
        if self.graph is None:
            return JobStatus.FAILED if self._archived_without_graph is not None else JobStatus.INITIALIZING
        return self.graph.state

    async def cancel(self) -> Acknowledge:
        self._handle(CancelJob())
        return ACK


def _log_failure(what: str) -> Callable[[Any, BaseException | None], None]:
    def done(_: Any, error: BaseException | None) -> None:
        if error is not None:
            log.warning("%s failed: %s", what, error)

    return done
