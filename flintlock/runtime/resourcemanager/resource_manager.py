"""ResourceManager: TaskExecutor and JobMaster registrations, slots, heartbeats (standalone driver).

Follows Flink ``resourcemanager/{ResourceManager,StandaloneResourceManager}``: TaskManagers started
by the user register themselves; JobMasters register and declare how many slots they need; the
``SlotManager`` allocates free slots to them. The ResourceManager sends heartbeat requests to
TaskExecutors (answered with a SlotReport) and to JobMasters; a TaskExecutor that stays silent for
``heartbeat.timeout`` is removed with its slots, a silent JobMaster loses its requirements.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.config.options import RPC_ASK_TIMEOUT
from flintlock.runtime.clock import Clock
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.heartbeat.heartbeat_manager import HeartbeatManager
from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.logs.files import LogChunk, LogInfo
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.resourcemanager.exceptions import (
    ResourceManagerException,
    UnknownTaskExecutorException,
)
from flintlock.runtime.resourcemanager.gateway import (
    RegistrationResponse,
    ResourceOverview,
    ResourceRequirements,
    TaskExecutorRegistration,
    TaskManagerInfo,
)
from flintlock.runtime.resourcemanager.slotmanager.slot_manager import SlotManager
from flintlock.runtime.resourcemanager.slotmanager.slot_tracker import (
    BlockedTaskExecutorsChanged,
    JobRequirementsRemoved,
    RequirementsDeclared,
    SlotFreed,
    SlotReportReceived,
    SlotState,
    TaskExecutorAdded,
    TaskExecutorRemoved,
)
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID, FencedRpcEndpoint
from flintlock.runtime.rpc.messages import ACK, Acknowledge
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.taskexecutor.gateway import SlotReport, TaskExecutorGateway
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = ["ResourceManager"]

log = logging.getLogger(__name__)


@dataclass
class _WorkerRegistration:
    """A registered TaskExecutor (Flink ``WorkerRegistration``)."""

    registration: TaskExecutorRegistration
    gateway: TaskExecutorGateway
    last_heartbeat_ms: int


@dataclass
class _JobMasterRegistration:
    job_id: JobID
    address: str
    resource_id: ResourceID
    gateway: JobMasterGateway


class _TaskManagerHeartbeatListener:
    def __init__(self, rm: ResourceManager) -> None:
        self._rm = rm

    def notify_heartbeat_timeout(self, resource_id: ResourceID) -> None:
        self._rm._close_task_manager_connection(
            resource_id, f"The heartbeat of TaskManager with id {resource_id} timed out."
        )

    def notify_target_unreachable(self, resource_id: ResourceID) -> None:
        self._rm._close_task_manager_connection(
            resource_id, f"TaskManager with id {resource_id} is no longer reachable."
        )


class _JobManagerHeartbeatListener:
    def __init__(self, rm: ResourceManager) -> None:
        self._rm = rm

    def notify_heartbeat_timeout(self, resource_id: ResourceID) -> None:
        for job_id in [j for j, r in self._rm._job_masters.items() if r.resource_id == resource_id]:
            self._rm._close_job_manager_connection(
                job_id, f"The heartbeat of JobManager with id {resource_id} timed out."
            )

    def notify_target_unreachable(self, resource_id: ResourceID) -> None:
        for job_id in [j for j, r in self._rm._job_masters.items() if r.resource_id == resource_id]:
            self._rm._close_job_manager_connection(
                job_id, f"JobManager with id {resource_id} is no longer reachable."
            )


class ResourceManager(FencedRpcEndpoint):
    """The cluster's ResourceManager endpoint (implements ``ResourceManagerGateway``).

    Registers itself at ``rpc_service`` on construction (``address`` is known before ``start``).
    Fenced (Flink's ``ResourceManagerId``): it accepts calls carrying ``leader_id`` only, and
    its own calls to TaskExecutors and JobMasters carry it.

    Args:
        rpc_service: where it lives and how it reaches TaskExecutors and JobMasters.
        configuration: heartbeat and RPC timeouts.
        clock: time source (``ManualClock`` in tests).
        endpoint_id: its RPC name.
        leader_id: the JobManager's leader session id (``DEFAULT_LEADER_ID`` without high
            availability).
    """

    def __init__(
        self,
        rpc_service: RpcService,
        configuration: Configuration,
        clock: Clock | None = None,
        endpoint_id: str = "resourcemanager",
        *,
        validate: bool = False,
        leader_id: str = DEFAULT_LEADER_ID,
    ) -> None:
        super().__init__(endpoint_id, clock, fencing_token=leader_id)
        self._rpc = rpc_service
        self._configuration = configuration
        self.resource_id = ResourceID.generate("resourcemanager")
        self._rpc_timeout_s = configuration.get(RPC_ASK_TIMEOUT)
        self._task_executors: dict[ResourceID, _WorkerRegistration] = {}
        #: blocked slow nodes -> monotonic seconds their block ends (Flink's BlocklistHandler)
        self._blocked_until: dict[ResourceID, float] = {}
        self._job_masters: dict[JobID, _JobMasterRegistration] = {}
        self.slot_manager = SlotManager(self, self._gateway_for, self._rpc_timeout_s,
                                        validate=validate)
        self._tm_heartbeats: HeartbeatManager[ResourceID] = HeartbeatManager.from_configuration(
            self, _TaskManagerHeartbeatListener(self), configuration, "rm->taskmanagers"
        )
        self._jm_heartbeats: HeartbeatManager[ResourceID] = HeartbeatManager.from_configuration(
            self, _JobManagerHeartbeatListener(self), configuration, "rm->jobmanagers"
        )
        rpc_service.register(self)

    # ---- life cycle ----------------------------------------------------------------------------

    async def on_start(self) -> None:
        self._tm_heartbeats.start()
        self._jm_heartbeats.start()
        log.info("ResourceManager %s started at %s", self.resource_id, self.address)

    async def on_stop(self) -> None:
        self._tm_heartbeats.stop()
        self._jm_heartbeats.stop()
        for resource_id, worker in list(self._task_executors.items()):
            try:
                await worker.gateway.disconnect_resource_manager("ResourceManager is shutting down.")
            except Exception as exc:  # best effort
                log.debug("could not tell %s about the shutdown: %s", resource_id, exc)

    async def stop(self) -> None:
        try:
            await super().stop()
        finally:
            self._rpc.unregister(self)

    # ---- TaskExecutors -------------------------------------------------------------------------

    async def register_task_executor(
        self, registration: TaskExecutorRegistration
    ) -> RegistrationResponse:
        """Register (or re-register, replacing the old registration) a TaskExecutor.

        Connecting to the TaskExecutor is awaited here: it reaches no other endpoint's mailbox.
        """
        try:
            gateway = await asyncio.wait_for(
                self._rpc.connect(registration.address, TaskExecutorGateway,
                                  fencing_token=self.fencing_token), self._rpc_timeout_s
            )
        except Exception as exc:  # reported as a refusal
            log.warning("Could not connect to TaskExecutor %s at %s: %s",
                        registration.resource_id, registration.address, exc)
            return RegistrationResponse(False, self.resource_id, f"cannot connect back: {exc}")
        resource_id = registration.resource_id
        if resource_id in self._task_executors:
            log.info("Replacing old registration of TaskExecutor %s.", resource_id)
            self._close_task_manager_connection(resource_id, "re-registered", notify=False)
        self._task_executors[resource_id] = _WorkerRegistration(
            registration, gateway, self.clock.now_ms()
        )
        self._tm_heartbeats.monitor_target(
            resource_id, lambda: gateway.heartbeat_from_resource_manager(self.resource_id)
        )
        # its slots come with its first slot report (as in Flink): a slot requested now could
        # cross that report, which would then say the slot is free after it was allocated
        total = registration.total_resource_profile
        self.slot_manager.handle(TaskExecutorAdded(
            resource_id, 0, f"register {resource_id}",
            total if isinstance(total, ResourceProfile) else None, registration.number_of_slots))
        log.info("Registered TaskExecutor %s at %s with %d slots and %s.", resource_id,
                 registration.address, registration.number_of_slots, total)
        return RegistrationResponse(True, self.resource_id)

    async def send_slot_report(self, resource_id: ResourceID, slot_report: SlotReport) -> Acknowledge:
        if resource_id not in self._task_executors:
            raise ValueError(f"TaskExecutor {resource_id} is not registered")
        self.slot_manager.handle(SlotReportReceived(resource_id, slot_report,
                                                    f"slot report {resource_id}"))
        return ACK

    async def notify_slot_available(
        self, resource_id: ResourceID, slot_id: SlotID, allocation_id: AllocationID,
        version: int = 0,
    ) -> None:
        if resource_id in self._task_executors:
            self.slot_manager.handle(SlotFreed(slot_id, allocation_id, f"freed {slot_id}",
                                               version))

    async def heartbeat_from_task_manager(self, resource_id: ResourceID, slot_report: SlotReport) -> None:
        worker = self._task_executors.get(resource_id)
        if worker is None or not self._tm_heartbeats.receive_heartbeat(resource_id):
            log.debug("heartbeat from unknown TaskExecutor %s", resource_id)
            return
        worker.last_heartbeat_ms = self.clock.now_ms()
        self.slot_manager.handle(SlotReportReceived(resource_id, slot_report,
                                                    f"heartbeat {resource_id}"))

    async def disconnect_task_manager(self, resource_id: ResourceID, cause: str) -> None:
        self._close_task_manager_connection(resource_id, cause, notify=False)

    def _close_task_manager_connection(self, resource_id: ResourceID, cause: str,
                                       notify: bool = True) -> None:
        worker = self._task_executors.pop(resource_id, None)
        if worker is None:
            return
        log.info("Closing TaskExecutor connection %s because: %s", resource_id, cause)
        self._tm_heartbeats.unmonitor_target(resource_id)
        self.slot_manager.handle(TaskExecutorRemoved(resource_id, f"removed {resource_id}"))
        if notify:
            self.run_async(worker.gateway.disconnect_resource_manager(cause))

    def _gateway_for(self, resource_id: ResourceID) -> TaskExecutorGateway | None:
        worker = self._task_executors.get(resource_id)
        return worker.gateway if worker else None

    # ---- JobMasters ----------------------------------------------------------------------------

    async def register_job_master(
        self, job_id: JobID, job_master_address: str, resource_id: ResourceID
    ) -> RegistrationResponse:
        try:
            gateway = await asyncio.wait_for(
                self._rpc.connect(job_master_address, JobMasterGateway,
                                  fencing_token=self.fencing_token), self._rpc_timeout_s
            )
        except Exception as exc:  # reported as a refusal
            return RegistrationResponse(False, self.resource_id, f"cannot connect back: {exc}")
        old = self._job_masters.get(job_id)
        if old is not None and old.address != job_master_address:
            log.info("Replacing JobMaster of job %s (%s -> %s).", job_id, old.address,
                     job_master_address)
        self._job_masters[job_id] = _JobMasterRegistration(job_id, job_master_address,
                                                           resource_id, gateway)
        self._jm_heartbeats.monitor_target(
            resource_id, lambda: gateway.heartbeat_from_resource_manager(self.resource_id)
        )
        log.info("Registered JobMaster %s for job %s.", job_master_address, job_id)
        return RegistrationResponse(True, self.resource_id)

    async def declare_required_resources(self, requirements: ResourceRequirements) -> Acknowledge:
        for profile, count in requirements.resources:
            if not isinstance(profile, ResourceProfile) or not isinstance(count, int) or count < 0:
                raise ValueError(f"invalid slot requirement: {count!r} x {profile!r}")
        if requirements.job_id not in self._job_masters:
            # Flink: "Could not find registered job manager" (e.g. a late declaration after the
            # JobMaster disconnected must not leave a requirement nobody will ever use)
            raise ResourceManagerException(
                f"job {requirements.job_id} has no registered JobMaster; register_job_master first"
            )
        log.info("Job %s declares %s.", requirements.job_id, ", ".join(
            f"{n} x {'default slot' if p.is_unknown else p}" for p, n in requirements.resources)
            or "no slots")
        self.slot_manager.handle(RequirementsDeclared(
            requirements.job_id, requirements.job_master_address, requirements.number_of_slots,
            f"declare {requirements.job_id}", tuple(requirements.resources),
        ))
        return ACK

    async def heartbeat_from_job_manager(self, resource_id: ResourceID) -> None:
        self._jm_heartbeats.receive_heartbeat(resource_id)

    async def disconnect_job_manager(self, job_id: JobID, cause: str) -> None:
        self._close_job_manager_connection(job_id, cause)

    def _close_job_manager_connection(self, job_id: JobID, cause: str) -> None:
        registration = self._job_masters.pop(job_id, None)
        log.info("Disconnecting JobMaster of job %s because: %s", job_id, cause)
        if registration is not None and not any(
            r.resource_id == registration.resource_id for r in self._job_masters.values()
        ):
            self._jm_heartbeats.unmonitor_target(registration.resource_id)
        self.slot_manager.handle(JobRequirementsRemoved(job_id, f"disconnect {job_id}"))

    # ---- queries -------------------------------------------------------------------------------

    async def request_task_manager_infos(self) -> tuple[TaskManagerInfo, ...]:
        tracker = self.slot_manager.tracker
        held = {rid: [s for s in tracker.slots(rid)
                      if s.state is not SlotState.FREE and s.job_id is not None]
                for rid in self._task_executors}
        return tuple(
            TaskManagerInfo(
                resource_id=rid,
                address=w.registration.address,
                data_port=w.registration.data_port,
                number_of_slots=tracker.number_of_slots(rid),
                free_slots=tracker.number_of_free_slots(rid),
                last_heartbeat_ms=w.last_heartbeat_ms,
                hardware=dict(w.registration.hardware),
                spark=dict(w.registration.spark),
                cpu_cores=w.registration.cpu_cores,
                memory=dict(w.registration.memory),
                allocated_slots=tuple(j for s in held[rid] if (j := s.job_id) is not None),
                allocated_slot_resources=tuple(r for s in held[rid]
                                               if (r := tracker.slot_resource(s)) is not None),
                total_resource=tracker.total_resource(rid),
                free_resource=tracker.available_resource(rid),
            )
            for rid, w in self._task_executors.items()
        )

    async def request_resource_overview(self) -> ResourceOverview:
        tracker = self.slot_manager.tracker
        blocked = sum(1 for r in tracker.blocked if r in self._task_executors)
        return ResourceOverview(len(self._task_executors), tracker.number_of_slots(),
                                tracker.number_of_free_slots(),
                                number_of_blocked_task_managers=blocked,
                                number_of_free_and_blocked_slots=(
                                    tracker.number_of_free_and_blocked_slots()),
                                spark_servers=self._spark_servers())

    def _spark_servers(self) -> int:
        """How many Spark servers (drivers) the registered TaskManagers run their subtasks on
        (``ResourceOverview.spark_servers``): an embedded one per process (``spark["server"]``,
        which the MiniCluster's TaskManagers share, else one per TaskManager), a remote one per
        ``spark.remote`` URL; 0 when none registered or one's Spark is unknown."""
        servers = self._spark_server_names()
        return len(servers) if servers is not None else 0

    def _spark_server_names(self, skip: Callable[[ResourceID], bool] = lambda _rid: False
                            ) -> set[str] | None:
        """The Spark servers of the registered TaskManagers except those ``skip`` names (see
        ``_spark_servers``); None when one's Spark is neither embedded nor Spark Connect."""
        servers: set[str] = set()
        for rid, worker in self._task_executors.items():
            if skip(rid):
                continue
            registration = worker.registration
            master = str(registration.spark.get("master", ""))
            if master.startswith("local"):
                servers.add(registration.spark.get("server") or str(registration.resource_id))
            elif master.startswith("sc://"):
                servers.add(master)
            else:
                return None
        return servers

    async def notify_new_blocked_nodes(self, resource_ids: tuple[ResourceID, ...],
                                       duration_s: float, cause: str) -> Acknowledge:
        if duration_s < 0:
            raise ValueError(f"negative block duration {duration_s}")
        until = self.clock.monotonic() + float(duration_s)
        for resource_id in resource_ids:
            self._blocked_until[resource_id] = max(self._blocked_until.get(resource_id, 0.0),
                                                   until)
        log.info("Blocking TaskManager(s) %s for %gs: %s", ", ".join(map(str, resource_ids)),
                 duration_s, cause)
        self._update_blocked()
        self.schedule(float(duration_s), self._update_blocked)
        return ACK

    def _update_blocked(self) -> None:
        """Drop the blocks that ran out; tell the SlotManager what is blocked now."""
        now = self.clock.monotonic()
        self._blocked_until = {r: t for r, t in self._blocked_until.items() if t > now + 1e-6}
        blocked = frozenset(self._blocked_until)
        if blocked != self.slot_manager.tracker.blocked:
            self.slot_manager.handle(BlockedTaskExecutorsChanged(blocked, "blocklist"))

    # ---- TaskManager logs and metrics (forwarded; awaiting a TaskExecutor cannot call us back) --

    def _registered_gateway(self, resource_id: ResourceID) -> TaskExecutorGateway:
        worker = self._task_executors.get(resource_id)
        if worker is None:
            raise UnknownTaskExecutorException(
                f"No TaskExecutor registered under {resource_id}.")
        return worker.gateway

    async def request_task_manager_log_list(self, resource_id: ResourceID) -> tuple[LogInfo, ...]:
        gateway = self._registered_gateway(resource_id)
        return await gateway.request_log_list(timeout=self._rpc_timeout_s)

    async def request_task_manager_log(self, resource_id: ResourceID, name: str | None,
                                       start: int, count: int) -> LogChunk:
        gateway = self._registered_gateway(resource_id)
        return await gateway.request_log(name, start, count,
                                         timeout=self._rpc_timeout_s)

    async def request_task_manager_metrics(self, resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        gateway = self._registered_gateway(resource_id)
        return await gateway.request_metrics(timeout=self._rpc_timeout_s)

    async def request_task_manager_thread_dump(self, resource_id: ResourceID,
                                               max_depth: int) -> tuple[ThreadInfo, ...]:
        gateway = self._registered_gateway(resource_id)
        return await gateway.request_thread_dump(max_depth, timeout=self._rpc_timeout_s)

    # ---- introspection (tests, MiniCluster) ----------------------------------------------------

    @property
    def registered_task_executors(self) -> list[ResourceID]:
        return list(self._task_executors)

    @property
    def registered_jobs(self) -> list[JobID]:
        return list(self._job_masters)

    def debug_state(self) -> dict[str, Any]:
        return {"task_executors": [str(r) for r in self._task_executors],
                "jobs": [str(j) for j in self._job_masters], **self.slot_manager.debug_state()}
