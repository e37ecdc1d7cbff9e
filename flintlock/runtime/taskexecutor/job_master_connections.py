"""The TaskExecutor's connections to the JobMasters of its jobs (a mixin of ``TaskExecutor``).

Follows Flink ``TaskExecutor``'s ``JobLeaderService`` / ``JobManagerConnection`` handling: a slot
allocated for a job whose JobMaster is not connected yet starts a registration at that JobMaster
(``register_task_manager``); once registered, the job's allocated slots are offered to it
(``offer_slots``; a rejected offer frees the slot) and its heartbeats are monitored. A JobMaster
that times out, becomes unreachable or disconnects releases the job here: its tasks fail, its
slots are freed and its partitions are released (deleted, unless they live on shared storage
under high availability, where the next leader may keep them). A job connection with no slots
and no partitions left is closed (Flink ``closeJobManagerConnectionIfNoAllocatedResources``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flintlock.runtime.ids import AllocationID, JobID, ResourceID
from flintlock.runtime.jobmaster.gateway import JobMasterGateway
from flintlock.runtime.resourcemanager.gateway import RegistrationResponse
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.taskexecutor.gateway import SlotOffer

if TYPE_CHECKING:
    from flintlock.runtime.taskexecutor.task_executor import TaskExecutor

__all__ = ["JobConnection", "JobManagerHeartbeatListener", "TaskExecutorJobConnections",
           "register_at_job_master"]

log = logging.getLogger(__name__)


@dataclass
class JobConnection:
    """This TaskExecutor's link to the JobMaster of one job (Flink ``JobManagerConnection``)."""

    job_id: JobID
    address: str
    generation: int
    gateway: JobMasterGateway | None = None  # None while connecting
    job_master_resource_id: ResourceID | None = None
    offered: set[AllocationID] = field(default_factory=set)


class JobManagerHeartbeatListener:
    def __init__(self, te: TaskExecutor) -> None:
        self._te = te

    def notify_heartbeat_timeout(self, job_id: JobID) -> None:
        self._te._release_job(job_id, f"The heartbeat of JobManager for job {job_id} timed out.",
                              tell_job_master=True,
                              delete_partitions=self._te._owns_partitions_of_lost_jobs())

    def notify_target_unreachable(self, job_id: JobID) -> None:
        self._te._release_job(job_id, f"JobManager for job {job_id} is no longer reachable.",
                              tell_job_master=True,
                              delete_partitions=self._te._owns_partitions_of_lost_jobs())


async def register_at_job_master(
    rpc: RpcService, address: str, leader_id: str, resource_id: ResourceID, own_address: str,
    timeout_s: float,
) -> tuple[JobMasterGateway, RegistrationResponse]:
    gateway = await rpc.connect(address, JobMasterGateway, timeout_s, fencing_token=leader_id)
    response = await gateway.register_task_manager(resource_id, own_address, timeout=timeout_s)
    return gateway, response


class TaskExecutorJobConnections:
    """JobMaster connections of ``TaskExecutor`` (see the module docstring)."""

    resource_id: ResourceID
    address: str
    run_async: Callable[..., Any]
    _jobs: dict[JobID, JobConnection]
    _job_generation: int
    _rpc: RpcService
    _leader_id: str
    _rpc_timeout_s: float
    _stopping: bool
    _shuffle_is_local: bool
    _jm_heartbeats: Any
    _table: Any
    _partitions: Any
    _free_slot_internal: Callable[..., None]
    _delete_partitions: Callable[..., None]

    def _connect_to_job_master(self, job_id: JobID, address: str) -> None:
        self._job_generation += 1
        job = JobConnection(job_id, address, self._job_generation)
        self._jobs[job_id] = job
        self.run_async(
            register_at_job_master(self._rpc, address, self._leader_id, self.resource_id,
                                    self.address, self._rpc_timeout_s),
            lambda result, error: self._on_job_master_registration(job, result, error),
        )

    def _on_job_master_registration(
        self, job: JobConnection,
        result: tuple[JobMasterGateway, RegistrationResponse] | None,
        error: BaseException | None,
    ) -> None:
        if self._jobs.get(job.job_id) is not job or self._stopping:
            return
        if error is not None or result is None or not result[1].success:
            why = str(error) if error is not None else (result[1].reason if result else "?")
            log.warning("Could not register at the JobMaster of job %s (%s): %s", job.job_id,
                        job.address, why)
            self._release_job(job.job_id, f"JobMaster registration failed: {why}",
                              tell_job_master=False)
            return
        job.gateway, response = result
        job.job_master_resource_id = response.resource_id
        self._jm_heartbeats.monitor_target(job.job_id)
        log.info("Connected to the JobMaster of job %s at %s.", job.job_id, job.address)
        self._offer_slots(job)

    def _offer_slots(self, job: JobConnection) -> None:
        assert job.gateway is not None
        slots = [s for s in self._table.allocated_not_active(job.job_id)
                 if s.allocation_id is not None and s.allocation_id not in job.offered]
        if not slots:
            return
        offers = tuple(SlotOffer(s.allocation_id, s.index, s.resource_profile) for s in slots
                       if s.allocation_id is not None)
        job.offered.update(o.allocation_id for o in offers)
        self.run_async(
            job.gateway.offer_slots(self.resource_id, offers, timeout=self._rpc_timeout_s),
            lambda accepted, error: self._on_offer_reply(job, offers, accepted, error),
        )

    def _on_offer_reply(self, job: JobConnection, offers: tuple[SlotOffer, ...],
                        accepted: tuple[SlotOffer, ...] | None, error: BaseException | None) -> None:
        job.offered.difference_update(o.allocation_id for o in offers)
        if self._jobs.get(job.job_id) is not job or self._stopping:
            return
        if error is not None:
            log.warning("Offering slots to the JobMaster of job %s failed: %s", job.job_id, error)
        accepted_ids = {o.allocation_id for o in accepted or ()}
        for offer in offers:
            slot = self._table.slot_by_allocation(offer.allocation_id)
            if slot is None or slot.job_id != job.job_id:
                continue  # freed meanwhile
            if offer.allocation_id in accepted_ids:
                self._table.mark_slot_active(offer.allocation_id)
            else:
                self._free_slot_internal(offer.allocation_id, "slot offer rejected")

    # ---- JobMaster connection ------------------------------------------------------------------

    async def heartbeat_from_job_manager(self, resource_id: ResourceID, job_id: JobID) -> None:
        job = self._jobs.get(job_id)
        if job is None or job.gateway is None:
            return
        self._jm_heartbeats.receive_heartbeat(job_id)
        self.run_async(job.gateway.heartbeat_from_task_manager(self.resource_id))

    async def disconnect_job_manager(self, job_id: JobID, cause: str) -> None:
        self._release_job(job_id, cause, tell_job_master=False)

    def _release_job(self, job_id: JobID, cause: str, tell_job_master: bool,
                     delete_partitions: bool = True) -> None:
        """The JobMaster is gone: fail the job's tasks, free its slots, release its partitions
        (delete them, or with ``delete_partitions=False`` only stop tracking them)."""
        log.info("Releasing job %s: %s", job_id, cause)
        self._close_job_connection(job_id, cause, tell_job_master)
        for slot in self._table.slots_of_job(job_id):
            if slot.allocation_id is not None:
                self._free_slot_internal(slot.allocation_id, cause, close_unused_job=False)
        released = self._partitions.stop_tracking_job(job_id)
        if delete_partitions:
            self._delete_partitions(released)

    def _owns_partitions_of_lost_jobs(self) -> bool:
        """Whether this TaskExecutor deletes the partitions of a job whose JobMaster it lost:
        yes for its own disk; not for shared storage under high availability, where the next
        leader's batch job recovery may keep their producers (it deletes the job's shared
        directory when the job ends)."""
        return self._shuffle_is_local or self._leader_id == DEFAULT_LEADER_ID

    def _close_job_if_unused(self, job_id: JobID) -> None:
        """Flink ``closeJobManagerConnectionIfNoAllocatedResources``."""
        if job_id in self._jobs and not self._table.slots_of_job(job_id) \
                and not self._partitions.is_tracking(job_id):
            self._close_job_connection(
                job_id, f"TaskExecutor {self.resource_id} has no more allocated slots for job "
                        f"{job_id}.", tell_job_master=True)

    def _close_job_connection(self, job_id: JobID, cause: str, tell_job_master: bool) -> None:
        job = self._jobs.pop(job_id, None)
        if job is None:
            return
        self._jm_heartbeats.unmonitor_target(job_id)
        if tell_job_master and job.gateway is not None and not self._stopping:
            self.run_async(job.gateway.disconnect_task_manager(self.resource_id, cause))
