"""ResourceManagerDriver: how an active ResourceManager starts and stops workers.

Follows Flink ``resourcemanager/active/{ResourceManagerDriver,ResourceEventHandler}``. The driver
knows one resource provider (here: processes on this host; in Flink: YARN containers, Kubernetes
pods) and nothing about slots or jobs; the ``ActiveResourceManager`` decides how many workers are
needed (``WorkerTracker``) and calls the driver from its mailbox. The driver reports back through
the ``ResourceEventHandler`` from any task of the event loop (the handler posts to the mailbox).

Unlike Flink, the ResourceManager names each worker (its ResourceID) before asking for it, so a
worker that registers is recognised without a driver round-trip; a Kubernetes driver uses that id
as the pod name and sets ``taskmanager.resource-id`` in the pod's configuration.
"""

from __future__ import annotations

from typing import Protocol

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.resourcemanager.active.worker_tracker import WorkerResourceSpec

__all__ = ["ResourceEventHandler", "ResourceManagerDriver"]


class ResourceEventHandler(Protocol):
    """What a driver tells its ResourceManager (Flink ``ResourceEventHandler``)."""

    def on_worker_terminated(self, resource_id: ResourceID, diagnostics: str) -> None:
        """The worker ended (exited, was killed, its pod was deleted); ``diagnostics`` says how."""

    def on_error(self, error: BaseException) -> None:
        """The driver cannot go on (its resource provider is gone)."""


class ResourceManagerDriver(Protocol):
    """Starts and stops workers of one resource provider."""

    async def initialize(self, handler: ResourceEventHandler, resource_manager_host: str,
                         resource_manager_port: int) -> None:
        """Prepare; workers started later register at this RPC host and port."""

    async def request_resource(self, resource_id: ResourceID, spec: WorkerResourceSpec) -> None:
        """Start worker ``resource_id`` with ``spec``; returns once it is launched (not once it
        registered).

        Raises:
            Exception: it could not be launched; the message says why.
        """

    async def release_resource(self, resource_id: ResourceID) -> None:
        """Stop the worker (gracefully, then forcibly); unknown or ended workers are ignored."""

    async def terminate(self) -> None:
        """Stop every worker still running and clean up; nothing is left behind."""

    def describe(self, resource_id: ResourceID) -> dict[str, str]:
        """What the driver knows of a worker (process id, log file), for REST and logs."""
