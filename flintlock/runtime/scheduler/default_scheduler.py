"""DefaultScheduler: the JobMaster's pure scheduling core (``events in -> commands out``).

Follows Flink ``DefaultScheduler`` + ``DefaultExecutionDeployer`` (fact sheet 5.1, 7.2), as a
synchronous state machine in the style of dask's ``WorkerState``: the JobMaster feeds it ``Event``s
(``handle``) and slot offers (``offer_slots``) on its mailbox and carries out the returned
``Command``s. No asyncio, no I/O; time comes from the injected clock (``monotonic()`` seconds,
``now_ms()`` epoch ms). It coordinates pure helpers: ``ExecutionFailureHandler`` and
``PendingRestarts`` (failover), ``SharedSlotRequests`` (slot sharing bookkeeping),
``ExecutionDeployer`` (slot allocation and bulk deployment, mixed in) and ``job_termination``
(sink work, partitions to release, JobResult).

Life of a region (one bulk):
  strategy says schedule -> executions CREATED->SCHEDULED -> one slot request per shared slot
  (same slot sharing group + same subtask index) -> when every request of the bulk has a slot, each
  execution goes DEPLOYING and a ``DeployTask`` is emitted. A slot is released back to the pool
  (idle) when all executions sharing it are terminal, so in BATCH the next region reuses it.

Failures: for a FAILED task the ``ExecutionFailureHandler`` asks the restart back-off strategy; if
it allows, the failover strategy's vertex set is cancelled and, after the back-off and once all of
them are terminal, reset to new attempts and rescheduled (job RUNNING -> RESTARTING -> RUNNING).
Otherwise the job goes FAILING, the other executions are cancelled, sinks are aborted and the job
ends FAILED with the root cause.

Checkpoints (STREAMING jobs with checkpointing on): a failover aborts the pending checkpoints
and the restarted subtasks start from the newest completed checkpoint
(``SchedulerCheckpoints``, the JobMaster's coordinator shell); a restart waits while a
checkpoint is being finalized, so it never restores an older one than what its sinks publish.

TaskManager loss: its slots leave the pool, its executions fail, and the partitions it stored on
its local disk (``PartitionLocation.stores_local_resources_on``) are forgotten, so region failover
re-runs their producers; a consumer about to be deployed with such an input fails with a
recoverable PartitionNotFound-style error naming it (checked after each step's deployments).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from flintlock.config import options
from flintlock.config.configuration import Configuration
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.executiongraph.archived import ExceptionHistoryEntry, JobResult
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.failover.execution_failure_handler import (
    ExecutionFailureHandler,
    PendingRestarts,
    task_failure_entry,
)
from flintlock.runtime.executiongraph.failover.failover_strategy import failover_strategy_for
from flintlock.runtime.executiongraph.failover.pipelined_regions import build_pipelined_regions
from flintlock.runtime.executiongraph.failover.restart_backoff import (
    RestartBackoffTimeStrategy,
    restart_backoff_from_configuration,
)
from flintlock.runtime.ids import (
    ExecutionAttemptID,
    ExecutionVertexID,
    IntermediateResultPartitionID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.jobgraph.job_graph import JobVertex
from flintlock.runtime.jobgraph.types import ExecutionState, JobStatus
from flintlock.runtime.jobmaster.slotpool.declarative_slot_pool import (
    AllocatedSlot,
    DeclarativeSlotPool,
)
from flintlock.runtime.scheduler.exceptions import (
    NoResourceAvailableException,
    TaskManagerLostException,
)
from flintlock.runtime.scheduler.execution_deployer import ExecutionDeployer
from flintlock.runtime.scheduler.failure_handling import FailureHandling
from flintlock.runtime.scheduler.job_termination import (
    create_job_result,
    partitions_to_release,
    sink_work,
)
from flintlock.runtime.scheduler.messages import (
    CancelJob,
    CancelTask,
    CancelTaskFailed,
    CheckpointFinalized,
    Command,
    DeclareResources,
    DeploymentFailed,
    Event,
    FailJob,
    FinalizeSinks,
    FreeSlot,
    GlobalFailure,
    IdleSlotCheck,
    JobTerminated,
    NotEnoughResources,
    ReleasePartitions,
    RestartDelayElapsed,
    ScheduleTimer,
    SinksFinalized,
    SlotBatchElapsed,
    SlotLost,
    SlotRequestTimeoutCheck,
    StartScheduling,
    TaskExecutionStateChanged,
    TaskManagerLost,
)
from flintlock.runtime.scheduler.shared_slot_requests import (
    SharedSlotRequests,
)
from flintlock.runtime.scheduler.strategy import PipelinedRegionSchedulingStrategy, ScheduleRegion
from flintlock.runtime.taskexecutor.gateway import SlotOffer
from flintlock.runtime.taskmanager.task_execution_state import (
    SerializedError,
    TaskExecutionState,
    TaskResult,
)

__all__ = ["DefaultScheduler", "SchedulerCheckpoints", "SchedulerClock"]

log = logging.getLogger(__name__)

_ACTIVE = (ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING)


class SchedulerCheckpoints(Protocol):
    """What the scheduler asks of the CheckpointCoordinator's shell (Flink's scheduler calls
    ``CheckpointCoordinator.abortPendingCheckpoints`` / ``restoreLatestCheckpointedState``)."""

    def on_failover(self) -> None:
        """Tasks are being restarted: abort the pending checkpoints."""

    def restore_blocked(self) -> bool:
        """A checkpoint is being finalized: restarts wait for ``CheckpointFinalized``."""

    def restore_state(self, vertices: list[ExecutionVertexID]) -> dict[ExecutionVertexID, Any]:
        """Per restarted vertex, the (checkpoint id, TaskStateSnapshot) it starts from."""


class SchedulerClock(Protocol):
    def monotonic(self) -> float: ...

    def now_ms(self) -> int: ...


class DefaultScheduler(FailureHandling, ExecutionDeployer):
    """Schedules, deploys, fails over and finishes one job.

    Args:
        graph: the job's ExecutionGraph (status CREATED).
        configuration: effective job configuration (cluster config overlaid with the job's keys).
        clock: ``monotonic()`` and ``now_ms()``.
        restart_backoff: overrides the strategy from ``restart-strategy.type``.
        validate: run ``validate()`` after every event (tests).
        pipelined_root: directory of the job's PIPELINED partitions (STREAMING jobs).
    """

    def __init__(
        self,
        graph: ExecutionGraph,
        configuration: Configuration,
        clock: SchedulerClock,
        restart_backoff: RestartBackoffTimeStrategy | None = None,
        validate: bool = False,
        pipelined_root: str = "",
        checkpoints: SchedulerCheckpoints | None = None,
    ) -> None:
        self.graph = graph
        #: the checkpoint coordinator's shell (None: checkpointing off)
        self.checkpoints = checkpoints
        #: where PIPELINED partitions live (``tdd_factory``); "" for jobs without them
        self.pipelined_root = pipelined_root
        self.configuration = configuration
        self.clock = clock
        self.regions = build_pipelined_regions(graph)
        #: subtasks restored as FINISHED from an earlier leader's job events
        self._restored: tuple[ExecutionVertexID, ...] = ()
        self.strategy = PipelinedRegionSchedulingStrategy(self.regions, self._partition_finished)
        self.failure_handler = ExecutionFailureHandler(
            graph.job_graph.job_id,
            failover_strategy_for(
                configuration.get(options.FAILOVER_STRATEGY),
                self.regions,
                self._partition_available,
                graph.vertex_state,
            ),
            restart_backoff or restart_backoff_from_configuration(configuration),
        )
        self.slot_request_timeout_s: float = configuration.get(options.SLOT_REQUEST_TIMEOUT)
        self.slot_idle_timeout_s: float = configuration.get(options.SLOT_IDLE_TIMEOUT)
        self.slot_request_max_interval_s: float = configuration.get(
            options.SLOT_REQUEST_MAX_INTERVAL)
        #: a SlotBatchElapsed timer is pending
        self._slot_batch_armed = False
        self.pool = DeclarativeSlotPool()
        self.splits: Mapping[JobVertexID, list[list[Any]]] = {}
        self.job_configuration = dict(graph.job_graph.configuration)
        self._validate = validate
        self._shared = SharedSlotRequests()
        self._restarts = PendingRestarts()
        self._declared: tuple[tuple[ResourceProfile, int], ...] = ()
        self._idle_check_at: float | None = None
        #: why the ResourceManager cannot provide slots ("" when it did not say)
        self._resource_shortage = ""
        #: executions whose TDD could not be built in this step, failed once the step is done
        self._undeployable: list[tuple[Execution, SerializedError]] = []
        #: TaskManagers reported lost (their TM-local partitions are gone)
        self._lost_task_managers: set[ResourceID] = set()
        #: None, "commit" or "abort" while a FinalizeSinks runs
        self.sink_phase: str | None = None
        self.terminated = False
        self._out: list[Command] = []
        #: topological position of each subtask (deployment and cancellation order)
        self._order = {v: i for i, v in enumerate(graph.execution_vertex_ids())}

    # ---- entry points --------------------------------------------------------------------------

    def handle(self, event: Event) -> list[Command]:
        """Process one event; returns the commands to carry out, in order."""
        self._out = []
        if not self.terminated:
            self._handle(event)
            self._fail_undeployable()
            self._sync()
        if self._validate:
            self.validate()
        out, self._out = self._out, []
        return out

    def offer_slots(
        self, resource_id: ResourceID, task_executor_address: str, offers: tuple[SlotOffer, ...]
    ) -> tuple[tuple[SlotOffer, ...], list[Command]]:
        """A TaskExecutor offers slots; returns the accepted offers and the resulting commands."""
        self._out = []
        accepted: tuple[SlotOffer, ...] = ()
        if not self.terminated and not self.graph.state.is_terminal():
            self._lost_task_managers.discard(resource_id)  # it came back
            accepted = self.pool.offer_slots(
                resource_id, task_executor_address, offers, self.clock.monotonic()
            )
            self._match_offered_slots()
            self._fail_undeployable()
            self._sync()
        if self._validate:
            self.validate()
        out, self._out = self._out, []
        return accepted, out

    def _match_offered_slots(self) -> None:
        """Match offered slots to waiting requests once they serve them all, else after
        ``slot.request.max-interval`` (Flink ``DeclarativeSlotPoolBridge``): offers trickle in
        one TaskManager at a time, and matching each at once would put the first requests (the
        subtasks that run first) all on the first TaskManager to answer."""
        if self.slot_request_max_interval_s <= 0 or self.pool.serves_all_pending():
            self._assign_pending_and_deploy()
        elif not self._slot_batch_armed:
            self._slot_batch_armed = True
            self._out.append(ScheduleTimer(self.slot_request_max_interval_s, SlotBatchElapsed()))

    def pending_slot_requests(self) -> int:
        return len(self.pool.pending_requests())

    def _partition_finished(self, partition_id: IntermediateResultPartitionID) -> bool:
        return self.graph.partitions[partition_id].finished

    def _partition_available(self, partition_id: IntermediateResultPartitionID) -> bool:
        """Finished and still stored (PartitionNotFound causes are handled by the strategy)."""
        return self.graph.partitions[partition_id].available

    # ---- event handlers ------------------------------------------------------------------------

    @functools.singledispatchmethod
    def _handle(self, event: Event) -> None:
        raise TypeError(f"unknown scheduler event {event!r}")

    @_handle.register
    def _(self, event: StartScheduling) -> None:
        if self.graph.state is not JobStatus.CREATED:
            return
        self.splits = event.splits
        self.graph.transition_to(JobStatus.RUNNING, "start scheduling")
        self._on_start()
        self._schedule(self.strategy.start_scheduling())
        for vertex_id in self._restored:  # their consumers, now that their outputs are there
            self._schedule(self.strategy.on_execution_finished(vertex_id))
        if self._restored and self.graph.all_finished() and self.sink_phase is None:
            self._finish()

    def restore_finished(self, results: Mapping[ExecutionVertexID, TaskResult]) -> None:
        """Before ``StartScheduling``: the subtasks in ``results`` finished under an earlier
        leader (batch job recovery, ``scheduler.batch_recovery``; whole regions only). They
        become FINISHED through Flink's RECONCILING state, with their results (partitions,
        committables), and their regions count as scheduled; the job then runs only the rest.
        """
        assert self.graph.state is JobStatus.CREATED, "restore before scheduling starts"
        for vertex_id, result in results.items():
            execution = self.graph.vertex(vertex_id).current_execution
            self._transition(execution, ExecutionState.RECONCILING, "JobManager failover")
            self._transition(execution, ExecutionState.FINISHED,
                             "restored: it finished under an earlier leader")
            self.graph.mark_finished(execution, result)
            self.strategy.scheduled.add(self.regions.region_of(vertex_id).index)
        self._restored = (*self._restored, *results)

    @_handle.register
    def _(self, event: TaskExecutionStateChanged) -> None:
        self._update_task_state(event.state)

    @_handle.register
    def _(self, event: TaskManagerLost) -> None:
        cause = f"TaskManager {event.resource_id} is lost: {event.cause}"
        self._lost_task_managers.add(event.resource_id)
        # first forget its TM-local partitions, so the failover of its tasks sees them missing
        lost = self.graph.mark_partitions_lost(event.resource_id, cause)
        if lost:
            log.info("job %s: %d result partition(s) lost with TaskManager %s", self.graph.job_id,
                     len(lost), event.resource_id)
        for slot in self.pool.remove_task_manager(event.resource_id):
            self._fail_slot_members(slot, cause)

    @_handle.register
    def _(self, event: SlotLost) -> None:
        slot = self.pool.slot(event.allocation_id)
        if slot is None or slot.resource_id != event.resource_id:
            return
        self.pool.remove_slot(event.allocation_id)
        self._fail_slot_members(
            slot, f"Slot {event.allocation_id} of TaskManager {event.resource_id} was lost: {event.cause}"
        )

    @_handle.register
    def _(self, event: DeploymentFailed) -> None:
        execution = self.graph.find_current_execution(event.attempt_id)
        if execution is not None:
            self._fail_execution(execution, event.error)

    @_handle.register
    def _(self, event: CancelTaskFailed) -> None:
        execution = self.graph.find_current_execution(event.attempt_id)
        if execution is not None and execution.state is ExecutionState.CANCELING:
            self._transition(execution, ExecutionState.CANCELED, f"cancel call failed: {event.error.short()}")
            self._on_terminal(execution)

    @_handle.register
    def _(self, event: CancelJob) -> None:
        state = self.graph.state
        if state.is_terminal() or state is JobStatus.CANCELLING or self.sink_phase == "commit":
            return
        self.graph.transition_to(JobStatus.CANCELLING, "cancel requested")
        self._restarts.clear()
        self._cancel_all()
        self._check_global_termination()

    @_handle.register
    def _(self, event: FailJob) -> None:
        self._fail_job(ExceptionHistoryEntry(event.error, self.clock.now_ms()))

    @_handle.register
    def _(self, event: GlobalFailure) -> None:
        if self.graph.state not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return
        entry = ExceptionHistoryEntry(event.error, self.clock.now_ms())
        self.graph.record_failure(entry)
        result = self.failure_handler.global_failure(
            frozenset(self.graph.execution_vertex_ids()), entry, self.clock.monotonic())
        self._restart_or_fail(result)

    @_handle.register
    def _(self, event: CheckpointFinalized) -> None:
        self._try_complete_restarts()

    @_handle.register
    def _(self, event: SinksFinalized) -> None:
        phase, self.sink_phase = self.sink_phase, None
        if phase == "commit":
            if event.error is None:
                self._terminate(JobStatus.FINISHED)
            else:
                self._fail_job(ExceptionHistoryEntry(event.error, self.clock.now_ms()))
        elif phase == "abort":
            if event.error is not None:
                log.warning("job %s: aborting sinks failed: %s", self.graph.job_id, event.error.short())
            self._terminate(
                JobStatus.CANCELED if self.graph.state is JobStatus.CANCELLING else JobStatus.FAILED
            )

    @_handle.register
    def _(self, event: SlotRequestTimeoutCheck) -> None:
        bulk = self._shared.bulk(event.bulk_id)
        if bulk is None or bulk.unfulfillable_since is None:
            return
        elapsed = self.clock.monotonic() - bulk.unfulfillable_since
        if elapsed + 1e-9 < self.slot_request_timeout_s:
            self._out.append(
                ScheduleTimer(self.slot_request_timeout_s - elapsed, SlotRequestTimeoutCheck(bulk.id))
            )
            return
        needed = len(bulk.requests)
        owned = self.pool.total_slots()
        message = (
            f"Could not acquire the minimum required resources: the job needs {needed} slot(s) at "
            f"once, the cluster offered {owned} slot(s) within "
            f"slot.request.timeout={self.slot_request_timeout_s:g}s "
            f"({len(self.pool.pending_requests())} slot request(s) pending). Add TaskManagers or "
            "slots (taskmanager.numberOfTaskSlots), or lower the parallelism."
        )
        sized = sorted({str(p) for p, _ in self.pool.required_resources() if not p.is_unknown})
        if sized:
            message += (f" Slot sharing groups ask for slots of {', '.join(sized)}: a TaskManager "
                        "must have that much CPU (taskmanager.cpu.cores) and memory left.")
        if self._resource_shortage:
            message += f" The ResourceManager reported: {self._resource_shortage}"
        error = SerializedError.from_exception(NoResourceAvailableException(message), non_recoverable=True)
        self._fail_job(ExceptionHistoryEntry(error, self.clock.now_ms()))

    @_handle.register
    def _(self, event: NotEnoughResources) -> None:
        self._resource_shortage = event.cause

    @_handle.register
    def _(self, event: SlotBatchElapsed) -> None:
        self._slot_batch_armed = False
        self._assign_pending_and_deploy()

    @_handle.register
    def _(self, event: IdleSlotCheck) -> None:
        self._idle_check_at = None
        for slot in self.pool.release_idle_slots(self.clock.monotonic(), self.slot_idle_timeout_s):
            self._out.append(
                FreeSlot(slot.task_executor_address, slot.allocation_id, "slot idle timeout")
            )

    @_handle.register
    def _(self, event: RestartDelayElapsed) -> None:
        if self._restarts.delay_elapsed(event.restart_id):
            self._try_complete_restarts()

    # ---- task state updates --------------------------------------------------------------------

    def _update_task_state(self, report: TaskExecutionState) -> None:
        execution = self.graph.find_current_execution(report.attempt_id)
        if execution is None:
            log.debug("ignoring %s of unknown attempt %s", report.state, report.attempt_id)
            return
        final_io = report.result.metrics if report.result is not None else report.metrics
        if final_io is not None and execution.result is None:
            execution.final_io = final_io  # what it processed (kept if it ends CANCELED or FAILED)
        if execution.is_terminal():
            # a task still running for an execution the JobMaster considers over (e.g. one
            # cancelled before its deployment arrived): stop it (Flink Execution.switchToRunning)
            if report.state in _ACTIVE:
                self._cancel_again(execution, report)
            return
        if report.task_manager:
            execution.task_manager = report.task_manager
        target = report.state
        if target is execution.state:
            return
        if execution.state is ExecutionState.CANCELING:
            if target in (ExecutionState.FINISHED, ExecutionState.FAILED, ExecutionState.CANCELED):
                self._transition(execution, ExecutionState.CANCELED, f"reported {target.name} while cancelling")
                self._on_terminal(execution)
            elif target in _ACTIVE:
                # the cancel call overtook the deployment (the TaskExecutor did not know the task
                # yet and acknowledged it): cancel again now that the task runs
                self._cancel_again(execution, report)
            return
        if target is ExecutionState.FINISHED:
            self._on_attempt_finishing(execution)
            self._transition(execution, ExecutionState.FINISHED)
            self.graph.mark_finished(execution, report.result)
            self._on_terminal(execution)
        elif target is ExecutionState.FAILED:
            error = report.error or SerializedError("UnknownError", "task failed without an error")
            self._fail_execution(execution, error)
        elif target is ExecutionState.CANCELED:
            # cancelled without being asked: counts as a failure of the task
            self._fail_execution(
                execution,
                SerializedError("TaskCancelledUnexpectedly", f"{execution.task_name_with_subtask()} was cancelled"),
                target=ExecutionState.CANCELED,
            )
        else:
            self._transition(execution, target, "reported")

    def _cancel_again(self, execution: Execution, report: TaskExecutionState) -> None:
        if execution.slot is None:
            log.warning("%s reported %s but has no slot to cancel it in", execution.task_name_with_subtask(),
                        report.state.name)
            return
        log.info("%s reported %s while %s: cancelling it again", execution.task_name_with_subtask(),
                 report.state.name, execution.state.name)
        self._out.append(CancelTask(execution.slot.task_executor_address, execution.attempt_id))

    # ---- scheduling and deployment -------------------------------------------------------------

    def _schedule(self, commands: list[ScheduleRegion]) -> None:
        for command in commands:
            self._allocate_slots_and_deploy(command.vertices)

    # ---- terminal executions and slots ---------------------------------------------------------

    def _transition(self, execution: Execution, target: ExecutionState, cause: str = "") -> None:
        self.graph.transition_execution(execution, target, cause)

    def _release_slot_share(self, execution: Execution) -> None:
        request = self._shared.release(execution.attempt_id)
        if request is None:
            return
        if request.slot is not None:
            self.pool.release_slot(request.id, self.clock.monotonic())
        else:
            self.pool.cancel_request(request.id)

    def _on_terminal(self, execution: Execution) -> None:
        """An attempt became terminal: free its slot share, then let the job make progress."""
        self._release_slot_share(execution)
        self._assign_pending_and_deploy()
        running = self.graph.state in (JobStatus.RUNNING, JobStatus.RESTARTING)
        if execution.state is ExecutionState.FINISHED and running:
            self._on_vertex_finished(execution)
            self._schedule(self.strategy.on_execution_finished(execution.attempt_id.execution_vertex_id))
        # sinks are committed once every subtask finished and no attempt that writes sinks
        # still runs (a speculative attempt that lost is cancelled first: it may still write
        # its sink output; losers that write only result partitions remove them themselves)
        if (running and self.graph.all_finished() and self.sink_phase is None
                and not self.graph.has_live_speculative_executions(writing_sinks_only=True)):
            self._finish()
        self._try_complete_restarts()
        self._check_global_termination()

    def source_parallelism(self, vertex: JobVertex) -> int:
        """How many subtasks the source of ``vertex`` enumerates splits for (the JobMaster asks
        from its I/O thread before ``StartScheduling``): its parallelism."""
        return vertex.parallelism

    def _on_start(self) -> None:
        """Hook when scheduling starts, after ``splits`` are set (the AdaptiveBatchScheduler
        expands the sources at their decided parallelism)."""

    def _on_vertex_finished(self, execution: Execution) -> None:
        """Hook before a FINISHED subtask's consumers are scheduled (the AdaptiveBatchScheduler
        initializes the job vertices whose inputs are now all produced)."""

    def _on_attempt_finishing(self, execution: Execution) -> None:
        """Hook before an attempt reported FINISHED becomes FINISHED (speculative execution
        makes it its subtask's representative attempt and cancels the others)."""

    def _fail_locally(self, execution: Execution, error: SerializedError) -> bool:
        """Hook: whether a failed attempt is handled without a failover (speculative execution:
        another attempt of the subtask still runs); True when the hook handled it."""
        return False

    def _fail_slot_members(self, slot: AllocatedSlot, message: str) -> None:
        request = self._shared.find(slot.request_id)
        if request is None:
            return
        self._shared.assign(request, None)
        error = SerializedError.from_exception(TaskManagerLostException(message))
        for attempt in sorted(request.members, key=self._attempt_order):
            execution = self.graph.find_current_execution(attempt)
            if execution is not None:
                self._fail_execution(execution, error)

    def _fail_execution(
        self, execution: Execution, error: SerializedError, target: ExecutionState = ExecutionState.FAILED
    ) -> None:
        if execution.is_terminal():
            return
        if execution.state is ExecutionState.CANCELING:
            self._transition(execution, ExecutionState.CANCELED, f"failed while cancelling: {error.short()}")
            self._on_terminal(execution)
            return
        if target is ExecutionState.FAILED and self._fail_locally(execution, error):
            return
        self._transition(execution, target, error.short())
        execution.failure = error
        entry = task_failure_entry(execution, error, self.clock.now_ms())
        self.graph.record_failure(entry)
        self._release_slot_share(execution)
        self._handle_task_failure(execution, entry)
        self._on_terminal(execution)

    # ---- finishing -----------------------------------------------------------------------------

    def _finish(self) -> None:
        """Every subtask FINISHED: commit the sinks, then the job is FINISHED."""
        work = sink_work(self.graph, commit=True)
        if work:
            self.sink_phase = "commit"
            self._out.append(FinalizeSinks(True, work))
        else:
            self._terminate(JobStatus.FINISHED)

    def _terminate(self, status: JobStatus) -> None:
        if self.terminated:
            return
        self.graph.transition_to(status)
        self.terminated = True
        self._shared.clear_bulks()
        self._restarts.clear()
        # release stored partitions on the TaskExecutors that hold them
        for address, ids in partitions_to_release(self.graph, self._lost_task_managers).items():
            self._out.append(ReleasePartitions(address, tuple(ids)))
        for slot in self.pool.release_all():
            self._out.append(FreeSlot(slot.task_executor_address, slot.allocation_id, f"job {status.name}"))
        self._out.append(JobTerminated(self.job_result()))

    def job_result(self) -> JobResult:
        return create_job_result(self.graph, self.clock.now_ms())

    def _attempt_order(self, attempt: ExecutionAttemptID) -> int:
        return self._order[attempt.execution_vertex_id]

    def _is_live_attempt(self, attempt: ExecutionAttemptID) -> bool:
        execution = self.graph.find_current_execution(attempt)
        return execution is not None and not execution.is_terminal()

    # ---- bookkeeping after every step ----------------------------------------------------------

    def _sync(self) -> None:
        if self.terminated:
            return
        for slot in self.pool.take_slots_to_free():  # their TaskManager is blocked
            self._out.append(FreeSlot(slot.task_executor_address, slot.allocation_id,
                                      "its TaskManager is blocked (slow node)"))
        required = self.pool.required_resources()
        if required != self._declared:
            self._declared = required
            self._out.append(DeclareResources(required))
        now = self.clock.monotonic()
        owned = self.pool.total_slots()
        for bulk in self._shared.bulks():
            if len(bulk.requests) <= owned:
                bulk.unfulfillable_since = None
            elif bulk.unfulfillable_since is None:
                bulk.unfulfillable_since = now
                self._out.append(ScheduleTimer(self.slot_request_timeout_s, SlotRequestTimeoutCheck(bulk.id)))
        deadline = self.pool.next_idle_deadline(self.slot_idle_timeout_s)
        if deadline is not None and (self._idle_check_at is None or deadline < self._idle_check_at):
            self._idle_check_at = deadline
            self._out.append(ScheduleTimer(max(0.0, deadline - now), IdleSlotCheck()))

    def validate(self) -> None:
        """Check invariants of the graph, the pool and the bookkeeping between them."""
        self.graph.validate()
        self.pool.validate(matching_deferred=self._slot_batch_armed)
        self.strategy.validate()
        self._shared.validate(self._is_live_attempt)
        for e in self.graph.all_current_executions():
            if e.state in (*_ACTIVE, ExecutionState.CANCELING):
                assert e.slot is not None, f"{e}: deployed without a slot"
        if self.terminated:
            assert self.graph.state.is_globally_terminal()
            assert self.pool.total_slots() == 0
