"""The TaskExecutor's registration at the ResourceManager, retried until it succeeds or times out.

Follows Flink ``TaskExecutorToResourceManagerConnection`` with its ``RetryingRegistration``: each
attempt connects and calls ``register_task_executor`` with a timeout that starts at 0.1 s and
doubles up to 30 s. A timed-out attempt is retried at once; a refused or failed one after the
current timeout. ``taskmanager.registration.timeout`` after ``connect`` without success, it gives
up and sets ``registration_error``. Every ``connect`` starts a new generation, so callbacks of an
older attempt are ignored. Runs in the owning endpoint's mailbox (its ``schedule`` and
``run_async``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from flintlock.runtime.clock import TimerHandle
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.resourcemanager.gateway import (
    RegistrationResponse,
    ResourceManagerGateway,
    TaskExecutorRegistration,
)
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID, RpcEndpoint
from flintlock.runtime.rpc.exceptions import RpcTimeout
from flintlock.runtime.rpc.service import RpcService
from flintlock.runtime.taskexecutor.exceptions import RegistrationTimeoutException

__all__ = ["EstablishedResourceManagerConnection", "ResourceManagerConnection"]

log = logging.getLogger(__name__)

_INITIAL_REGISTRATION_TIMEOUT_S = 0.1
_MAX_REGISTRATION_TIMEOUT_S = 30.0


@dataclass
class EstablishedResourceManagerConnection:
    """A successful registration: the ResourceManager's gateway and id."""

    gateway: ResourceManagerGateway
    resource_id: ResourceID


#: called in the mailbox after a successful registration, with its generation
OnRegistered = Callable[[EstablishedResourceManagerConnection, int], None]


class ResourceManagerConnection:
    """Registers one TaskExecutor at the ResourceManager at ``address``.

    Args:
        endpoint: the TaskExecutor; callbacks and timers run in its mailbox.
        rpc: how to reach the ResourceManager.
        address: RPC address of the ResourceManager.
        registration_timeout_s: give up after this long (``taskmanager.registration.timeout``).
        registration: builds the registration sent with each attempt.
        on_registered: called once an attempt succeeded.
    """

    def __init__(
        self,
        endpoint: RpcEndpoint,
        rpc: RpcService,
        address: str,
        registration_timeout_s: float,
        registration: Callable[[], TaskExecutorRegistration],
        on_registered: OnRegistered,
    ) -> None:
        self._endpoint = endpoint
        self._rpc = rpc
        self.address = address
        #: the ResourceManager's leader id (its fencing token), set with ``address``
        self.leader_id = DEFAULT_LEADER_ID
        self._registration_timeout_s = registration_timeout_s
        self._registration = registration
        self._on_registered = on_registered
        #: the registration in effect, or None while (re)connecting
        self.established: EstablishedResourceManagerConnection | None = None
        #: set when registration gave up (``taskmanager.registration.timeout``)
        self.registration_error: RegistrationTimeoutException | None = None
        #: incremented by every ``connect`` and ``close``; older callbacks are ignored
        self.generation = 0
        self._deadline: TimerHandle | None = None
        self._closed = False

    def connect(self) -> None:
        """Forget the current registration and register again (no-op once closed)."""
        if self._closed:
            return
        self.generation += 1
        generation = self.generation
        self.established = None
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self._endpoint.schedule(
            self._registration_timeout_s, self._on_deadline, generation
        )
        log.info("Connecting to ResourceManager at %s.", self.address)
        self._attempt(generation, _INITIAL_REGISTRATION_TIMEOUT_S)

    def close(self) -> None:
        """Stop registering for good; ``established`` stays for the final disconnect."""
        self._closed = True
        self.generation += 1

    def _is_stale(self, generation: int) -> bool:
        return generation != self.generation or self._closed

    def _attempt(self, generation: int, timeout_s: float) -> None:
        if self._is_stale(generation):
            return
        self._endpoint.run_async(
            _register_at(self._rpc, self.address, self.leader_id, self._registration(),
                         timeout_s),
            lambda result, error: self._on_attempt(generation, timeout_s, result, error),
        )

    def _on_attempt(
        self, generation: int, timeout_s: float,
        result: tuple[ResourceManagerGateway, RegistrationResponse] | None,
        error: BaseException | None,
    ) -> None:
        if self._is_stale(generation):
            return
        next_timeout = min(timeout_s * 2, _MAX_REGISTRATION_TIMEOUT_S)
        if error is not None or result is None or not result[1].success:
            why = str(error) if error is not None else (result[1].reason if result else "?")
            if isinstance(error, RpcTimeout):
                log.debug("Registration at %s timed out after %.1f s; retrying.",
                          self.address, timeout_s)
                self._attempt(generation, next_timeout)
            else:
                log.debug("Registration at %s failed (%s); retrying in %.1f s.",
                          self.address, why, timeout_s)
                self._endpoint.schedule(timeout_s, self._attempt, generation, next_timeout)
            return
        gateway, response = result
        rm_id = response.resource_id or ResourceID("resourcemanager")
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.established = EstablishedResourceManagerConnection(gateway, rm_id)
        self.registration_error = None
        self._on_registered(self.established, generation)

    def _on_deadline(self, generation: int) -> None:
        if generation != self.generation or self.established is not None:
            return
        self.generation += 1  # stop retrying
        self.registration_error = RegistrationTimeoutException(
            f"Could not register at the ResourceManager {self.address} within "
            f"{self._registration_timeout_s:.0f} s (taskmanager.registration.timeout)."
        )
        log.error("%s", self.registration_error)


async def _register_at(
    rpc: RpcService, address: str, leader_id: str, registration: TaskExecutorRegistration,
    timeout_s: float,
) -> tuple[ResourceManagerGateway, RegistrationResponse]:
    gateway = await rpc.connect(address, ResourceManagerGateway, timeout_s,
                                fencing_token=leader_id)
    response = await gateway.register_task_executor(registration, timeout=timeout_s)
    return gateway, response
