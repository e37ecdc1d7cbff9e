"""Errors of the ResourceManager (Flink ``resourcemanager/exceptions``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["ResourceManagerException", "UnknownTaskExecutorException"]


class ResourceManagerException(FlintlockException):
    """A request the ResourceManager refuses (e.g. resources declared by an unregistered job)."""


class UnknownTaskExecutorException(ResourceManagerException):
    """No TaskExecutor is registered under the requested ResourceID (Flink
    ``UnknownTaskExecutorException``)."""
