"""Errors of the ResourceManager (Flink ``resourcemanager/exceptions``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["ResourceManagerException"]


class ResourceManagerException(FlintlockException):
    """A request the ResourceManager refuses (e.g. resources declared by an unregistered job)."""
