"""Errors of the TaskExecutor (Flink ``taskexecutor/exceptions``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = [
    "RegistrationTimeoutException",
    "SlotAllocationException",
    "TaskExecutorException",
    "TaskSubmissionException",
]


class TaskExecutorException(FlintlockException):
    """Base class of TaskExecutor errors."""


class SlotAllocationException(TaskExecutorException):
    """A slot could not be allocated (unknown, or taken by another allocation)."""


class TaskSubmissionException(TaskExecutorException):
    """A task could not be submitted (no ACTIVE slot for its allocation, or a duplicate)."""


class RegistrationTimeoutException(TaskExecutorException):
    """The TaskExecutor could not register at the ResourceManager within
    ``taskmanager.registration.timeout``."""
