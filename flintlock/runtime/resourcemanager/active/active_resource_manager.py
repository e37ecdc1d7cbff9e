"""ActiveResourceManager: a ResourceManager that starts TaskManagers when jobs need slots.

Follows Flink ``resourcemanager/active/ActiveResourceManager``: the ``WorkerTracker`` (pure) decides,
from what the SlotManager could not serve, how many workers to start and which idle ones to stop;
this shell executes its commands through a ``ResourceManagerDriver`` and feeds back what happened
(a worker launched or failed to, registered, ended). It re-checks after every SlotManager event
and every ``CHECK_INTERVAL_S`` (timeouts, cool-downs). Configuration: ``resourcemanager.*`` and
``slotmanager.*`` keys of ``flintlock.config.resource_manager_options``.

Registration: a TaskExecutor it started registers like any other; one it did not start (started
by a user) is accepted too, its slots are used, and it is never stopped.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.config.options import SPARK_REMOTE, TASK_SLOTS, TM_CPU_CORES
from flintlock.config.resource_manager_options import (
    RM_INITIAL_TASK_MANAGERS,
    RM_START_WORKER_MAX_FAILURE_RATE,
    RM_START_WORKER_RETRY_INTERVAL,
    RM_TASK_MANAGER_REGISTRATION_TIMEOUT,
    RM_TASK_MANAGER_TIMEOUT,
    SLOTMANAGER_MAX_SLOTS,
    SLOTMANAGER_REDUNDANT_TASK_MANAGERS,
)
from flintlock.config.sensitive import hide_credentials
from flintlock.runtime.clock import Clock
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.resourcemanager.active.driver import ResourceManagerDriver
from flintlock.runtime.resourcemanager.active.worker_tracker import (
    CheckReleasable,
    ReleasableAnswered,
    ResourcesChecked,
    StartWorker,
    StopWorker,
    WorkerCommand,
    WorkerRegistered,
    WorkerResourceSpec,
    WorkerSettings,
    WorkerStartFailed,
    WorkerState,
    WorkerTerminated,
    WorkerTracker,
)
from flintlock.runtime.resourcemanager.gateway import (
    PendingTaskManagerInfo,
    RegistrationResponse,
    ResourceOverview,
    TaskExecutorRegistration,
)
from flintlock.runtime.resourcemanager.resource_manager import ResourceManager
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import RpcService

__all__ = ["ActiveResourceManager", "worker_settings"]

log = logging.getLogger(__name__)

#: how REST names the states of the workers it lists as pending
_PENDING_STATE = {WorkerState.REQUESTED: "STARTING", WorkerState.RELEASING: "STOPPING"}

#: how often timeouts and cool-downs are checked without any other event (seconds)
CHECK_INTERVAL_S = 0.5


def worker_settings(configuration: Configuration,
                    default_max_slots: int | None = None) -> WorkerSettings:
    """The WorkerTracker's settings from the configuration.

    Each worker has ``taskmanager.numberOfTaskSlots`` slots and ``taskmanager.cpu.cores`` cores
    (default: one per slot, at most this host's cores), so workers on one host do not
    oversubscribe it as long as the slots do not. ``default_max_slots`` applies when
    ``slotmanager.number-of-slots.max`` is unset (never below one worker's slots).
    """
    slots = configuration.get(TASK_SLOTS)
    cores = configuration.get(TM_CPU_CORES) or max(1, min(slots, os.cpu_count() or 1))
    max_slots = configuration.get(SLOTMANAGER_MAX_SLOTS)
    if max_slots is None and default_max_slots is not None:
        max_slots = max(slots, default_max_slots)
    return WorkerSettings(
        spec=WorkerResourceSpec(number_of_slots=slots, cpu_cores=cores),
        max_slots=max_slots,
        redundant=configuration.get(SLOTMANAGER_REDUNDANT_TASK_MANAGERS),
        idle_timeout_ms=round(configuration.get(RM_TASK_MANAGER_TIMEOUT) * 1000),
        registration_timeout_ms=round(configuration.get(RM_TASK_MANAGER_REGISTRATION_TIMEOUT) * 1000),
        max_failure_rate=configuration.get(RM_START_WORKER_MAX_FAILURE_RATE),
        retry_interval_ms=round(configuration.get(RM_START_WORKER_RETRY_INTERVAL) * 1000),
        initial_workers=configuration.get(RM_INITIAL_TASK_MANAGERS),
    )


class ActiveResourceManager(ResourceManager):
    """A ResourceManager with a driver that starts and stops its TaskManagers.

    Args:
        rpc_service, configuration, clock, endpoint_id, validate, leader_id: as for
            ``ResourceManager``.
        driver: starts and stops workers (``ProcessResourceManagerDriver``).
        rpc_host, rpc_port: where the workers register (this JobManager's RPC service).
        worker_prefix: workers are named ``<worker_prefix>-<n>``.
        default_max_slots: the driver's capacity, when ``slotmanager.number-of-slots.max`` is
            unset (the process driver: this host's cores).
    """

    def __init__(self, rpc_service: RpcService, configuration: Configuration,
                 driver: ResourceManagerDriver, rpc_host: str, rpc_port: int,
                 clock: Clock | None = None, endpoint_id: str = "resourcemanager", *,
                 validate: bool = False, leader_id: str = DEFAULT_LEADER_ID,
                 worker_prefix: str = "taskmanager", default_max_slots: int | None = None) -> None:
        super().__init__(rpc_service, configuration, clock, endpoint_id, validate=validate,
                         leader_id=leader_id)
        self._driver = driver
        self._rpc_host, self._rpc_port = rpc_host, rpc_port
        self.workers = WorkerTracker(worker_settings(configuration, default_max_slots),
                                     worker_prefix, validate=validate)
        self._check_posted = False
        self._held_back_logged = ""
        self._told_jobs: set[JobID] = set()  # told why slots are held back
        self.slot_manager.on_handled = self._request_check

    # ---- life cycle ----------------------------------------------------------------------------

    async def on_start(self) -> None:
        await super().on_start()
        await self._driver.initialize(self, self._rpc_host, self._rpc_port)
        spec = self.workers.settings.spec
        log.info("Active ResourceManager: starts TaskManagers of %d slot(s) and %d core(s) as "
                 "jobs need them", spec.number_of_slots, spec.cpu_cores)
        self.schedule(CHECK_INTERVAL_S, self._periodic_check)
        self._request_check()  # resourcemanager.initial-task-managers start now

    async def on_stop(self) -> None:
        try:
            await super().on_stop()
        finally:
            await self._driver.terminate()

    # ---- events from the ResourceManager and the driver ----------------------------------------

    async def register_task_executor(
        self, registration: TaskExecutorRegistration
    ) -> RegistrationResponse:
        worker = self.workers.worker(registration.resource_id)
        if worker is not None and worker.state is WorkerState.RELEASING:
            return RegistrationResponse(False, self.resource_id,
                                        "this TaskManager is being stopped")
        response = await super().register_task_executor(registration)
        if response.success and self.workers.is_ours(registration.resource_id):
            self._handle(WorkerRegistered(registration.resource_id, self.clock.now_ms(),
                                          f"register {registration.resource_id}"))
        return response

    def on_worker_terminated(self, resource_id: ResourceID, diagnostics: str) -> None:
        """``ResourceEventHandler``: called by the driver on the event loop."""
        self.post(self._worker_terminated, resource_id, diagnostics)

    def on_error(self, error: BaseException) -> None:
        log.error("The ResourceManager driver failed: %s", error)

    def _worker_terminated(self, resource_id: ResourceID, diagnostics: str) -> None:
        self._handle(WorkerTerminated(resource_id, diagnostics, self.clock.now_ms(),
                                      f"terminated {resource_id}"))
        # at once, not after heartbeat.timeout: its slots and its tasks are gone
        if resource_id in self.registered_task_executors:
            self._close_task_manager_connection(resource_id, diagnostics, notify=False)
            for registration in self._job_masters.values():
                self.run_async(registration.gateway.disconnect_task_manager(
                    resource_id, f"TaskManager {resource_id} ended: {diagnostics}"))
        self._request_check()

    # ---- checks --------------------------------------------------------------------------------

    def _request_check(self) -> None:
        """Check once the current mailbox message is done (events come in bursts)."""
        if not self._check_posted:
            self._check_posted = True
            self.post(self._check)

    def _periodic_check(self) -> None:
        self._check()
        self.schedule(CHECK_INTERVAL_S, self._periodic_check)

    def _check(self) -> None:
        self._check_posted = False
        tracker = self.slot_manager.tracker
        slots = {rid: (tracker.number_of_slots(rid), tracker.number_of_free_slots(rid))
                 for rid in tracker.task_executors()}
        jobs = tracker.jobs()
        missing: dict[ResourceProfile, int] = {}
        for job_id in jobs:
            for profile, n in tracker.missing_resources(job_id).items():
                missing[profile] = missing.get(profile, 0) + n
        default_missing = missing.pop(ResourceProfile.UNKNOWN, 0)
        self._handle(ResourcesChecked(
            self.clock.now_ms(), default_missing,
            any(tracker.required_slots(j) for j in jobs), slots, "check", missing))
        held_back = self.workers.held_back
        if held_back.split(";")[0] != self._held_back_logged.split(";")[0]:  # not per countdown
            self._held_back_logged = held_back
            if held_back:  # a cap is normal operation; start-up failures are not
                log.log(logging.INFO if "number-of-slots.max" in held_back else logging.WARNING,
                        "%s", held_back)
        if not held_back:
            self._told_jobs.clear()
            return
        for job_id in jobs:  # tell the JobMasters still missing slots why none come
            registration = self._job_masters.get(job_id)
            if (registration is not None and job_id not in self._told_jobs
                    and tracker.missing_slots(job_id)):
                self._told_jobs.add(job_id)
                self.run_async(registration.gateway.notify_not_enough_resources(held_back))

    def _handle(self, event: Any) -> None:
        for command in self.workers.handle(event):
            self._execute(command)

    def _execute(self, command: WorkerCommand) -> None:
        rid = command.resource_id
        if isinstance(command, StartWorker):
            log.info("Starting TaskManager %s (%s)", rid, command.cause_id)

            def started(_: Any, error: BaseException | None) -> None:
                if error is not None:
                    self._start_failed(rid, error)

            self.run_async(self._driver.request_resource(rid, command.spec), started)
        elif isinstance(command, StopWorker):
            log.info("Stopping TaskManager %s: %s", rid, command.reason)
            # not told: a TaskExecutor told of a disconnect registers again
            self._close_task_manager_connection(rid, f"stopped by the ResourceManager: "
                                                     f"{command.reason}", notify=False)
            self.run_async(self._driver.release_resource(rid))
        elif isinstance(command, CheckReleasable):
            gateway = self._gateway_for(rid)
            if gateway is None:
                self._handle(ReleasableAnswered(rid, False, self.clock.now_ms(), "not connected"))
                return
            self.run_async(gateway.can_be_released(timeout=self._rpc_timeout_s),
                           lambda answer, error: self._handle(ReleasableAnswered(
                               rid, bool(answer) and error is None, self.clock.now_ms(),
                               f"can_be_released {rid}")))

    def _start_failed(self, resource_id: ResourceID, error: BaseException) -> None:
        cause = f"{type(error).__name__}: {error}"
        log.warning("TaskManager %s could not be started: %s", resource_id, cause)
        self._handle(WorkerStartFailed(resource_id, cause, self.clock.now_ms(),
                                       f"start failed {resource_id}"))
        self._request_check()

    async def request_resource_overview(self) -> ResourceOverview:
        overview = await super().request_resource_overview()
        pending = tuple(
            PendingTaskManagerInfo(
                w.resource_id, _PENDING_STATE[w.state], w.since_ms, w.spec.number_of_slots,
                w.spec.cpu_cores, w.spec.task_heap_memory, w.spec.managed_memory)
            for w in self.workers.workers() if w.state in _PENDING_STATE)
        return dataclasses.replace(
            overview, number_of_pending_task_managers=sum(p.state == "STARTING" for p in pending),
            pending_task_managers=pending, held_back=self.workers.held_back)

    def _spark_servers(self) -> int:
        """The most Spark servers this cluster's TaskManagers can run on: those of the
        TaskManagers a user started, plus the workers it may start, all on ``spark.remote``'s
        server when that is set, else one embedded server each, as many as
        ``slotmanager.number-of-slots.max`` allows (this host's cores by default). 0 (unknown)
        without a cap, or when a TaskManager's Spark is neither embedded nor Spark Connect.

        The AdaptiveBatchScheduler bounds a job's automatically sized vertices by this count
        when the job starts, typically before any worker registered: a job submitted to an
        application cluster would otherwise size its scans for servers that never come (TPC-H
        Q6 ran as two subtasks on one new server instead of one Spark plan)."""
        servers = self._spark_server_names(skip=self.workers.is_ours)
        if servers is None:
            return 0
        remote = self._configuration.get(SPARK_REMOTE)
        if remote:
            return len(servers | {hide_credentials(str(remote))})
        settings = self.workers.settings
        if settings.max_slots is None:
            return 0
        tracker = self.slot_manager.tracker  # the cap counts the slots of users' TaskManagers
        users = sum(tracker.number_of_slots(rid) for rid in tracker.task_executors()
                    if not self.workers.is_ours(rid))
        ours = max(0, settings.max_slots - users) // settings.spec.number_of_slots
        return max(1, len(servers) + ours)

    def debug_state(self) -> dict[str, Any]:
        return {**super().debug_state(), "workers": {
            str(w.resource_id): w.state.value for w in self.workers.workers()}}
