"""Scheduler errors (Flink ``NoResourceAvailableException``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = ["NoResourceAvailableException", "TaskManagerLostException"]


class NoResourceAvailableException(FlintlockException):
    """The job could not get the slots it needs within ``slot.request.timeout``."""


class TaskManagerLostException(FlintlockException):
    """The TaskManager running a task was lost (heartbeat timeout, disconnect, slot freed)."""
