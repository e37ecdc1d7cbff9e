"""TaskExecutor: a TaskManager's endpoint; owns its slots and runs Tasks (Flink ``TaskExecutor``).

On start it registers at the ResourceManager (retrying: ``ResourceManagerConnection``, Flink
``RetryingRegistration``) and sends its SlotReport. ``request_slot`` allocates a slot, connects to
the job's JobMaster, registers there and offers the slot; accepted slots become ACTIVE and take
tasks. Each Task runs in its own thread
and reports state changes back into this endpoint's mailbox (``post_from_thread``); the endpoint
forwards INITIALIZING, RUNNING and the final state to the JobMaster, in order per task.

The ResourceManager and JobMasters send heartbeat requests; this endpoint answers them and treats a
peer that stays silent for ``heartbeat.timeout`` as lost (re-register at the ResourceManager; fail
a lost JobMaster's tasks, free its slots, release its partitions). The JobMaster side lives in
``job_master_connections`` (a mixin), checkpoints in ``checkpoints``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.config.options import (
    REGISTRATION_TIMEOUT,
    RPC_ASK_TIMEOUT,
    SHUFFLE_DIR,
    TASK_METRICS_REPORT_INTERVAL,
    TASK_SLOTS,
)
from flintlock.runtime.clock import Clock
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.heartbeat.heartbeat_manager import HeartbeatManager
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateResultPartitionID,
    JobID,
    ResourceID,
    SlotID,
)
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.logs.files import LogChunk, LogInfo
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.gateway import TaskExecutorRegistration
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID, RpcEndpoint
from flintlock.runtime.rpc.exceptions import FencingTokenMismatch
from flintlock.runtime.rpc.messages import ACK, Acknowledge
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.taskexecutor.checkpoints import TaskExecutorCheckpoints
from flintlock.runtime.taskexecutor.exceptions import (
    RegistrationTimeoutException,
    SlotAllocationException,
    TaskSubmissionException,
)
from flintlock.runtime.taskexecutor.gateway import SlotReport
from flintlock.runtime.taskexecutor.job_master_connections import (
    JobConnection,
    JobManagerHeartbeatListener,
    TaskExecutorJobConnections,
)
from flintlock.runtime.taskexecutor.live_metrics_pusher import LiveMetricsPusher
from flintlock.runtime.taskexecutor.logs_and_metrics import TaskExecutorLogsAndMetrics
from flintlock.runtime.taskexecutor.partition_table import PartitionTable, delete_partition_uris
from flintlock.runtime.taskexecutor.process_status import (
    registration_resources,
    total_resource_profile,
)
from flintlock.runtime.taskexecutor.resource_manager_connection import (
    EstablishedResourceManagerConnection,
    ResourceManagerConnection,
)
from flintlock.runtime.taskexecutor.slot.task_slot_table import TaskSlotTable
from flintlock.runtime.taskexecutor.task_state_reporter import TaskStateReporter
from flintlock.runtime.taskmanager.task import Task
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = ["TaskExecutor"]

log = logging.getLogger(__name__)

#: how many cancelled-but-unknown attempts a TaskExecutor remembers
_MAX_EARLY_CANCELS = 1024

#: states forwarded to the JobMaster (DEPLOYING and CANCELING are already known there)
_REPORTED_STATES = frozenset({ExecutionState.INITIALIZING, ExecutionState.RUNNING,
                              ExecutionState.FINISHED, ExecutionState.FAILED,
                              ExecutionState.CANCELED})
_STOP_TASKS_TIMEOUT_S = 10.0


class _ResourceManagerHeartbeatListener:
    def __init__(self, te: TaskExecutor) -> None:
        self._te = te

    def notify_heartbeat_timeout(self, resource_id: ResourceID) -> None:
        self._te._reconnect_to_resource_manager(
            f"The heartbeat of ResourceManager with id {resource_id} timed out."
        )

    def notify_target_unreachable(self, resource_id: ResourceID) -> None:
        self._te._reconnect_to_resource_manager(
            f"ResourceManager with id {resource_id} is no longer reachable."
        )


class TaskExecutor(TaskExecutorJobConnections, TaskExecutorCheckpoints, RpcEndpoint):
    """The TaskManager's RPC endpoint (implements ``TaskExecutorGateway``).

    Registers itself at ``rpc_service`` on construction (``address`` is known before ``start``).

    Args:
        rpc_service: where it lives; how it reaches the ResourceManager and JobMasters.
        configuration: slots, heartbeats, timeouts.
        resource_manager_address: RPC address of the ResourceManager.
        services: handed unchanged to every task's RuntimeEnvironment (``"spark"``,
            ``"shuffle_dir"``, ...).
        resource_id: this TaskManager's id (generated when None).
        clock: time source (``ManualClock`` in tests).
        number_of_slots: overrides ``taskmanager.numberOfTaskSlots``.
        spark_info: description of the Spark session for REST (``{"master": ..., "version": ...}``).
        leader_id: the session id of the JobManager leadership whose ResourceManager is at
            ``resource_manager_address`` (``DEFAULT_LEADER_ID`` without high availability).

    Fencing: every call of the ResourceManager and the JobMasters must carry the current
    leader's id (the fencing token of its ResourceManagerId and JobMasterIds); once leader
    retrieval announced a new leader, a deposed leader can neither allocate a slot nor deploy,
    cancel or checkpoint a task here (``FencingTokenMismatch``). Flink checks the JobMasterId
    in ``submitTask`` and the ResourceManagerId in ``requestSlot`` the same way. Log and
    metric queries are unfenced.
    """

    UNFENCED_METHODS = frozenset({"request_log_list", "request_log", "request_metrics",
                                  "request_thread_dump"})

    def __init__(
        self,
        rpc_service: RpcService,
        configuration: Configuration,
        resource_manager_address: str,
        services: Mapping[str, Any],
        resource_id: ResourceID | None = None,
        clock: Clock | None = None,
        number_of_slots: int | None = None,
        *,
        spark_info: Mapping[str, str] | None = None,
        leader_id: str = DEFAULT_LEADER_ID,
    ) -> None:
        self.resource_id = resource_id or ResourceID.generate("taskmanager")
        super().__init__(f"taskexecutor-{self.resource_id}", clock)
        self._rpc = rpc_service
        self._configuration = configuration
        self._rm_address = resource_manager_address
        self._leader_id = leader_id
        self._services = services
        self._spark_info = dict(spark_info or {})
        self._rpc_timeout_s = configuration.get(RPC_ASK_TIMEOUT)
        self._table = TaskSlotTable(number_of_slots or configuration.get(TASK_SLOTS))
        #: attempts cancelled before their submit_task arrived (the two calls raced); bounded
        self._cancelled_before_submit: OrderedDict[ExecutionAttemptID, None] = OrderedDict()
        self._partitions = PartitionTable()
        #: log files (task logs go there) and task metrics, for REST and Prometheus
        self._observability = TaskExecutorLogsAndMetrics(services, configuration)
        #: partitions live on this TaskManager's own disk unless ``shuffle.storage-dir`` is set
        self._shuffle_is_local = not configuration.get(SHUFFLE_DIR)
        self._rm_connection = ResourceManagerConnection(
            self, rpc_service, resource_manager_address, configuration.get(REGISTRATION_TIMEOUT),
            self._registration, self._on_registered,
        )
        self._rm_connection.leader_id = leader_id
        self._jobs: dict[JobID, JobConnection] = {}
        self._job_generation = 0
        self._reports = TaskStateReporter(self.run_async, self._rpc_timeout_s,
                                          lambda: self._stopping)
        self._ending_tasks: list[Task] = []
        self._stopping = False
        self._rm_heartbeats: HeartbeatManager[ResourceID] = HeartbeatManager.from_configuration(
            self, _ResourceManagerHeartbeatListener(self), configuration, "te->resourcemanager"
        )
        self._jm_heartbeats: HeartbeatManager[JobID] = HeartbeatManager.from_configuration(
            self, JobManagerHeartbeatListener(self), configuration, "te->jobmanagers"
        )
        self._live_metrics = LiveMetricsPusher(
            self, configuration.get(TASK_METRICS_REPORT_INTERVAL), self._table.tasks,
            self._job_gateway, self.resource_id, self.clock.now_ms,
            self._observability.task_metrics.live_metrics_reported)
        rpc_service.register(self)

    # ---- exposed for MiniCluster / REST / tests --------------------------------------------------

    @property
    def number_of_slots(self) -> int:
        return self._table.number_of_slots

    @property
    def number_of_running_tasks(self) -> int:
        return self._table.number_of_tasks()

    @property
    def is_registered(self) -> bool:
        return self._rm_connection.established is not None

    @property
    def registration_error(self) -> RegistrationTimeoutException | None:
        """Set when registration gave up (``taskmanager.registration.timeout``)."""
        return self._rm_connection.registration_error

    @property
    def slot_table(self) -> TaskSlotTable:
        """Read-only use only (tests, REST); mutated only in the mailbox."""
        return self._table

    @property
    def partition_table(self) -> PartitionTable:
        return self._partitions

    def _job_gateway(self, job_id: JobID) -> JobMasterGateway | None:
        job = self._jobs.get(job_id)
        return job.gateway if job is not None else None

    def connected_jobs(self) -> list[JobID]:
        return [j for j, c in self._jobs.items() if c.gateway is not None]

    def debug_state(self) -> dict[str, Any]:
        return {
            "registered": self.is_registered,
            "slots": [(s.index, s.state.value, str(s.job_id), len(s.tasks))
                      for s in self._table.slots()],
            "jobs": {str(j): c.gateway is not None for j, c in self._jobs.items()},
            "tasks": [f"{t.name}: {t.state.value}" for t in self._table.tasks()],
        }

    # ---- life cycle ----------------------------------------------------------------------------

    async def on_start(self) -> None:
        self._rm_heartbeats.start()
        self._jm_heartbeats.start()
        self._live_metrics.start()
        log.info("TaskExecutor %s started at %s with %d slots.", self.resource_id, self.address,
                 self.number_of_slots)
        self._rm_connection.connect()

    async def on_stop(self) -> None:
        self._stopping = True
        self._rm_connection.close()
        self._rm_heartbeats.stop()
        self._jm_heartbeats.stop()
        self._live_metrics.stop()
        tasks: list[Task] = self._table.tasks()
        for task in tasks:
            task.cancel()
        tasks += [t for t in self._ending_tasks if t.is_alive()]
        if tasks:
            stuck = await asyncio.to_thread(_join_tasks, tasks, _STOP_TASKS_TIMEOUT_S)
            for name in stuck:
                log.error("Task %s did not stop within %.0f s.", name, _STOP_TASKS_TIMEOUT_S)
        cause = f"TaskExecutor {self.resource_id} is shutting down."
        for job in list(self._jobs.values()):
            if job.gateway is not None:
                await _quietly(job.gateway.disconnect_task_manager(self.resource_id, cause))
        self._jobs.clear()
        rm = self._rm_connection.established
        if rm is not None:
            await _quietly(rm.gateway.disconnect_task_manager(self.resource_id, cause))
            self._rm_connection.established = None
        # result partitions stay: on shared storage they outlive this TaskManager
        self._observability.close()

    async def stop(self) -> None:
        try:
            await super().stop()
        finally:
            self._rpc.unregister(self)

    # ---- ResourceManager connection ------------------------------------------------------------

    def _registration(self) -> TaskExecutorRegistration:
        resources = registration_resources(self._configuration)
        self._table.total_resource = total_resource_profile(resources,
                                                            self._configuration.spark_settings())
        return TaskExecutorRegistration(
            address=self.address,
            resource_id=self.resource_id,
            number_of_slots=self.number_of_slots,
            spark=dict(self._spark_info),
            total_resource_profile=self._table.total_resource,
            **resources,
        )

    def _on_registered(self, rm: EstablishedResourceManagerConnection, generation: int) -> None:
        self._rm_heartbeats.monitor_target(rm.resource_id)
        log.info("Successful registration at ResourceManager %s (%s).", self._rm_address,
                 rm.resource_id)
        self.run_async(
            rm.gateway.send_slot_report(self.resource_id, self._slot_report(),
                                        timeout=self._rpc_timeout_s),
            lambda _r, err: self._on_slot_report_sent(generation, err),
        )

    def _on_slot_report_sent(self, generation: int, error: BaseException | None) -> None:
        if error is not None and generation == self._rm_connection.generation:
            self._reconnect_to_resource_manager(f"sending the slot report failed: {error}")

    def _reconnect_to_resource_manager(self, cause: str) -> None:
        if self._stopping:
            return
        rm = self._rm_connection.established
        if rm is not None:
            log.info("Lost ResourceManager %s: %s Reconnecting.", rm.resource_id, cause)
            self._rm_heartbeats.unmonitor_target(rm.resource_id)
        self._rm_connection.connect()

    def _slot_report(self) -> SlotReport:
        return self._table.create_slot_report(self.resource_id)

    async def heartbeat_from_resource_manager(self, resource_id: ResourceID) -> None:
        rm = self._rm_connection.established
        if rm is None or rm.resource_id != resource_id:
            return
        self._rm_heartbeats.receive_heartbeat(resource_id)
        self.run_async(rm.gateway.heartbeat_from_task_manager(self.resource_id, self._slot_report()))

    async def disconnect_resource_manager(self, cause: str) -> None:
        self._reconnect_to_resource_manager(cause)

    def check_fencing(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                      fencing_token: str | None) -> None:
        if method in self.UNFENCED_METHODS or fencing_token == self._leader_id:
            return
        raise FencingTokenMismatch(
            f"TaskExecutor {self.resource_id} rejected {method}: the caller's leader id "
            f"{fencing_token} is not that of the current JobManager leader ({self._leader_id}); "
            "a deposed leader's ResourceManager or JobMaster cannot change this TaskExecutor")

    def notify_resource_manager_leader(self, address: str, session_id: str | None) -> None:
        """Leader retrieval found a new leadership (``session_id``) whose ResourceManager is at
        ``address`` (high availability). The leadership before is over with its JobMasters, so
        their jobs are released (tasks failed, slots freed), then this TaskExecutor registers
        at the new leader (Flink ``ResourceManagerLeaderListener``; Flink's ``JobLeaderService``
        would offer the slots to the jobs' new JobMasters instead)."""
        session_id = session_id or DEFAULT_LEADER_ID
        if session_id == self._leader_id or self._stopping:
            return
        self._leader_id = self._rm_connection.leader_id = session_id
        cause = f"the JobManager leader changed (its ResourceManager is now at {address})"
        for job_id in sorted(self._table.jobs() | set(self._jobs), key=str):
            # partitions on shared storage stay: the new leader's batch job recovery may keep
            # their producers (it deletes them when the job ends)
            self._release_job(job_id, cause, tell_job_master=False,
                              delete_partitions=self._owns_partitions_of_lost_jobs())
        self._rm_address = self._rm_connection.address = address
        self._reconnect_to_resource_manager(cause + ".")

    def _notify_slot_available(self, index: int, allocation_id: AllocationID) -> None:
        rm = self._rm_connection.established
        if rm is not None and not self._stopping:
            self.run_async(rm.gateway.notify_slot_available(
                self.resource_id, SlotID(self.resource_id, index), allocation_id,
                self._table.version))

    # ---- slots ---------------------------------------------------------------------------------

    async def request_slot(
        self, slot_id: SlotID, job_id: JobID, allocation_id: AllocationID, job_master_address: str,
        resource_profile: ResourceProfile = ResourceProfile.UNKNOWN,
    ) -> int:
        if slot_id.resource_id != self.resource_id:
            raise SlotAllocationException(f"slot {slot_id} does not belong to {self.resource_id}")
        if not isinstance(resource_profile, ResourceProfile):
            raise SlotAllocationException(f"not a ResourceProfile: {type(resource_profile).__name__}")
        if self._stopping:
            raise SlotAllocationException(f"TaskExecutor {self.resource_id} is shutting down")
        newly = self._table.allocate_slot(slot_id.slot_number, job_id, allocation_id,
                                          resource_profile)
        if newly:
            log.info("Allocated slot %s for job %s (allocation %s).", slot_id, job_id,
                     allocation_id)
        job = self._jobs.get(job_id)
        if job is not None and job.address != job_master_address:
            self._close_job_connection(job_id, "a new JobMaster took over", tell_job_master=True)
            job = None
        if job is None:
            self._connect_to_job_master(job_id, job_master_address)
        elif job.gateway is not None:
            self._offer_slots(job)
        return self._table.version

    async def free_slot(self, allocation_id: AllocationID, cause: str) -> Acknowledge:
        self._free_slot_internal(allocation_id, cause)
        return ACK

    def _free_slot_internal(self, allocation_id: AllocationID, cause: str,
                            close_unused_job: bool = True) -> None:
        slot = self._table.slot_by_allocation(allocation_id)
        if slot is None:
            return
        job_id, index = slot.job_id, slot.index
        _, tasks = self._table.free_slot(allocation_id, cause)
        log.info("Freeing slot %d (allocation %s, job %s): %s", index, allocation_id, job_id,
                 cause)
        for task in tasks:
            task.fail_externally(f"Slot {index} was freed: {cause}")
        if not tasks:
            self._notify_slot_available(index, allocation_id)
            if close_unused_job and job_id is not None:
                self._close_job_if_unused(job_id)

    # ---- tasks ---------------------------------------------------------------------------------

    async def submit_task(self, tdd: TaskDeploymentDescriptor) -> Acknowledge:
        job = self._jobs.get(tdd.job_id)
        if job is None or job.gateway is None:
            raise TaskSubmissionException(
                f"TaskExecutor {self.resource_id} has no JobMaster connection for job {tdd.job_id}"
            )
        # the JobMaster may deploy before its offer reply reached us (Flink tryMarkSlotActive)
        self._table.try_mark_slot_active(tdd.job_id, tdd.allocation_id)
        task = Task(tdd, self._observability.task_services, self._task_state_callback,
                    str(self.resource_id), self.checkpoint_responder(tdd.job_id))
        self._observability.task_deployed(tdd)
        self._table.add_task(tdd.allocation_id, tdd.job_id, tdd.attempt_id, task)
        if tdd.attempt_id in self._cancelled_before_submit:
            del self._cancelled_before_submit[tdd.attempt_id]
            log.info("Task %s (%s) was cancelled before it arrived; not starting it.", task.name,
                     tdd.attempt_id)
            task.cancel()  # never started: reports CANCELED and frees its place in the slot
            return ACK
        log.info("Received task %s (%s), deploying into slot with allocation %s.", task.name,
                 tdd.attempt_id, tdd.allocation_id)
        task.start()
        return ACK

    async def cancel_task(self, attempt_id: ExecutionAttemptID) -> Acknowledge:
        task: Task | None = self._table.task(attempt_id)
        if task is not None:
            task.cancel()
        else:
            # the cancel may have overtaken the task's submission: remember it for a while
            self._cancelled_before_submit[attempt_id] = None
            while len(self._cancelled_before_submit) > _MAX_EARLY_CANCELS:
                self._cancelled_before_submit.popitem(last=False)
        return ACK

    def _task_state_callback(self, state: TaskExecutionState) -> None:
        """Called from task threads (and the cancelling thread): hand over to the mailbox."""
        self.post_from_thread(self._on_task_state_change, state)

    def _on_task_state_change(self, state: TaskExecutionState) -> None:
        if self._shuffle_is_local and state.result is not None and state.result.partitions:
            state = _stored_locally_on(state, self.resource_id)
        self._observability.task_state_changed(state, self.clock.now_ms())
        # report first: freeing the slot below may close the job connection
        if state.state in _REPORTED_STATES:
            self._enqueue_report(state)
        if state.state.is_terminal():
            task, freed_slot, freed_allocation = self._table.remove_task(state.attempt_id)
            # its thread ends right after this report; stop() still waits for it
            self._ending_tasks = [t for t in self._ending_tasks if t.is_alive()]
            if task is not None:
                self._ending_tasks.append(task)
            if state.state is ExecutionState.FINISHED and state.result is not None:
                for location in state.result.partitions:
                    self._partitions.start_tracking(state.job_id, location.partition_id,
                                                    location.uri)
            if freed_slot is not None and freed_allocation is not None:
                self._notify_slot_available(freed_slot.index, freed_allocation)
                self._close_job_if_unused(state.job_id)

    def _enqueue_report(self, state: TaskExecutionState) -> None:
        job = self._jobs.get(state.job_id)
        if job is None or job.gateway is None or self._stopping:
            log.debug("Dropping state %s of %s: no JobMaster connection.", state.state.value,
                      state.attempt_id)
            return
        self._reports.enqueue(state, job.gateway)

    # ---- partitions ----------------------------------------------------------------------------

    async def release_partitions(
        self, job_id: JobID, partition_ids: tuple[IntermediateResultPartitionID, ...]
    ) -> None:
        self._delete_partitions(self._partitions.stop_tracking(job_id, partition_ids))
        self._close_job_if_unused(job_id)

    async def can_be_released(self) -> bool:
        return not self._partitions.tracks_any()  # tracked only on TM-local storage

    def _delete_partitions(self, uris: list[str]) -> None:
        if not uris:
            return
        log.info("Releasing %d result partition(s).", len(uris))

        def on_done(failed: list[str] | None, error: BaseException | None) -> None:
            if error is not None or failed:
                log.warning("Could not delete partitions %s: %s", failed, error)

        self.run_async(asyncio.to_thread(delete_partition_uris, uris), on_done)

    # ---- logs and metrics ----------------------------------------------------------------------

    async def request_log_list(self) -> tuple[LogInfo, ...]:
        return await self._observability.log_list()

    async def request_log(self, name: str | None, start: int, count: int) -> LogChunk:
        return await self._observability.log(name, start, count)

    async def request_metrics(self) -> TaskManagerMetricsSnapshot:
        return await self._observability.snapshot(
            str(self.resource_id), self.clock.now_ms(), self.number_of_slots,
            self._slot_report().free_slots(), self.number_of_running_tasks)

    async def request_thread_dump(self, max_depth: int) -> tuple[ThreadInfo, ...]:
        return await self._observability.thread_dump(max_depth)

# ---- helpers that run outside the mailbox (they touch no endpoint state) ---------------------------


def _stored_locally_on(state: TaskExecutionState, resource_id: ResourceID) -> TaskExecutionState:
    """The report with its partitions marked as held on this TaskManager's local disk (Flink
    ``ShuffleDescriptor.storesLocalResourcesOn``): the JobMaster forgets them if we are lost."""
    assert state.result is not None
    partitions = tuple(
        dataclasses.replace(p, stores_local_resources_on=resource_id) for p in state.result.partitions
    )
    return dataclasses.replace(state, result=dataclasses.replace(state.result, partitions=partitions))


async def _quietly(awaitable: Any, timeout_s: float = 2.0) -> None:
    try:
        await asyncio.wait_for(awaitable, timeout_s)
    except Exception as exc:  # best effort during shutdown
        log.debug("shutdown notification failed: %s", exc)


def _join_tasks(tasks: list[Task], timeout_s: float) -> list[str]:
    """Join task threads with one shared deadline; returns the names of threads still alive."""
    import time

    deadline = time.monotonic() + timeout_s
    for task in tasks:
        task.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in tasks if t.is_alive()]
