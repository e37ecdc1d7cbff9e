"""The JobMaster's connections: its registration and resource declarations at the
ResourceManager, and the heartbeats with its TaskManagers and the ResourceManager (a mixin of
``JobMaster``; Flink ``JobMaster``'s ``ResourceManagerConnection`` and its heartbeat managers).

- **ResourceManager**: registered with ``register_job_master``, retried every ``RM_RETRY_S`` until
  it succeeds; resource requirements (``(ResourceProfile, count)`` pairs) are declared one at a
  time, the latest wins, and declared again after a re-registration.
- **Heartbeats**: every ``heartbeat.interval`` the JobMaster sends a heartbeat to each registered
  TaskManager; one that has not answered for ``heartbeat.timeout``, or whose last
  ``heartbeat.rpc-failure-threshold`` heartbeat RPCs failed, is lost (``TaskManagerLost`` to the
  scheduler). A ResourceManager silent for ``heartbeat.timeout`` is reconnected.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flintlock.runtime.heartbeat.heartbeat_manager import UnreachableTargets
from flintlock.runtime.ids import JobID, ResourceID
from flintlock.runtime.resourcemanager.gateway import (
    RegistrationResponse,
    ResourceManagerGateway,
    ResourceRequirements,
)
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.scheduler.messages import Event, TaskManagerLost

__all__ = ["RM_RETRY_S", "JobMasterConnections", "TaskManagerConnection"]

log = logging.getLogger(__name__)

#: seconds between attempts to register at the ResourceManager
RM_RETRY_S = 1.0


@dataclass
class TaskManagerConnection:
    """A TaskManager registered at the JobMaster: its RPC address and its last heartbeat
    (the clock's monotonic seconds)."""

    address: str
    last_heartbeat: float


class JobMasterConnections:
    """ResourceManager connection and heartbeats of ``JobMaster`` (see the module docstring)."""

    job_id: JobID
    job_result: Any
    address: str
    fencing_token: str | None
    resource_id: ResourceID
    resource_manager_address: str
    rpc_service: RpcService
    clock: Any
    _rm: ResourceManagerGateway | None
    _rm_connecting: bool
    _rm_last_heartbeat: float | None
    _wanted_slots: tuple[tuple[Any, int], ...] | None
    _declared_slots: tuple[tuple[Any, int], ...] | None
    _declaring: bool
    _task_managers: dict[ResourceID, TaskManagerConnection]
    _heartbeat_interval: float
    _heartbeat_timeout: float
    _unreachable: UnreachableTargets[ResourceID]
    run_async: Callable[..., Any]
    schedule: Callable[..., Any]
    _send: Callable[..., Any]
    _call_te: Callable[..., Any]
    _handle: Callable[[Event], None]

    # ---- ResourceManager connection -----------------------------------------------------------

    def _connect_to_resource_manager(self) -> None:
        if self._rm_connecting or self.job_result is not None:
            return
        self._rm_connecting = True

        async def register() -> tuple[ResourceManagerGateway, RegistrationResponse]:
            gateway = await self.rpc_service.connect(
                self.resource_manager_address, ResourceManagerGateway,
                fencing_token=self.fencing_token)
            response = await gateway.register_job_master(self.job_id, self.address, self.resource_id)
            return gateway, response

        self.run_async(register(), self._on_rm_registered)

    def _on_rm_registered(self, result: Any, error: BaseException | None) -> None:
        self._rm_connecting = False
        if self.job_result is not None:
            return
        if error is not None or not result[1].success:
            reason = error if error is not None else result[1].reason
            log.warning("job %s: registration at the ResourceManager failed (%s); retrying", self.job_id, reason)
            self.schedule(RM_RETRY_S, self._connect_to_resource_manager)
            return
        self._rm = result[0]
        self._rm_last_heartbeat = None
        self._declared_slots = None
        log.info("job %s: registered at the ResourceManager %s", self.job_id, self.resource_manager_address)
        if self._wanted_slots is not None:
            self._declare(self._wanted_slots)

    def _declare(self, resources: tuple[tuple[Any, int], ...]) -> None:
        """Send the latest requirement; declarations are sent one at a time, latest wins."""
        self._wanted_slots = resources
        if self._rm is None or self._declaring or self._declared_slots == resources:
            return
        self._declaring = True
        rm = self._rm

        def done(_: Any, error: BaseException | None) -> None:
            self._declaring = False
            if error is not None:
                log.warning("job %s: declaring %d slot(s) failed: %s", self.job_id,
                            sum(n for _, n in resources), error)
                return
            self._declared_slots = resources
            if self._wanted_slots is not None and self._wanted_slots != resources and self.job_result is None:
                self._declare(self._wanted_slots)

        self._send(
            rm.declare_required_resources(ResourceRequirements(self.job_id, self.address, resources=resources)),
            done,
        )

    # ---- heartbeats ----------------------------------------------------------------------------

    def _heartbeat_tick(self) -> None:
        if self.job_result is not None:
            return
        now = self.clock.monotonic()
        for resource_id, connection in list(self._task_managers.items()):
            if now - connection.last_heartbeat > self._heartbeat_timeout:
                self._task_manager_lost(resource_id, f"heartbeat of TaskManager with id {resource_id} "
                                        f"timed out (heartbeat.timeout={self._heartbeat_timeout:g}s)")
                continue
            self._send(
                self._call_te(connection.address, "heartbeat_from_job_manager", self.resource_id, self.job_id),
                functools.partial(self._heartbeat_rpc_done, resource_id, connection),
            )
        if (
            self._rm is not None
            and self._rm_last_heartbeat is not None
            and now - self._rm_last_heartbeat > self._heartbeat_timeout
        ):
            log.warning("job %s: heartbeat of the ResourceManager timed out; reconnecting", self.job_id)
            self._rm = None
            self._connect_to_resource_manager()
        self.schedule(self._heartbeat_interval, self._heartbeat_tick)

    def _heartbeat_rpc_done(self, resource_id: ResourceID, connection: TaskManagerConnection,
                            _: Any, error: BaseException | None) -> None:
        if error is not None:
            log.debug("job %s: heartbeat to TaskManager %s failed: %s", self.job_id, resource_id, error)
        if self._unreachable.rpc_done(resource_id, error) and \
                self._task_managers.get(resource_id) is connection and self.job_result is None:
            self._task_manager_lost(resource_id, f"TaskManager with id {resource_id} is unreachable: "
                                    f"{self._unreachable.threshold} heartbeat RPCs in a row failed "
                                    f"({error}; heartbeat.rpc-failure-threshold)")

    def _task_manager_lost(self, resource_id: ResourceID, cause: str) -> None:
        log.warning("job %s: %s", self.job_id, cause)
        del self._task_managers[resource_id]
        self._unreachable.forget(resource_id)
        self._handle(TaskManagerLost(resource_id, cause))
