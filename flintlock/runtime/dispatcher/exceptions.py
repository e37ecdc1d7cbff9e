"""Errors of job submission and lookup (Flink ``runtime/dispatcher`` and ``runtime/messages``)."""

from __future__ import annotations

from flintlock.exceptions import FlintlockException

__all__ = [
    "DuplicateJobSubmissionException",
    "FlinkJobNotFoundException",
    "JobSubmissionException",
]


class JobSubmissionException(FlintlockException):
    """The Dispatcher refused a job; the message says why."""


class DuplicateJobSubmissionException(JobSubmissionException):
    """A job with this id is running or already finished."""


class FlinkJobNotFoundException(FlintlockException):
    """No job with this id is known (Flink's name, kept so Flink users recognise it)."""

    def __init__(self, job_id: object) -> None:
        super().__init__(f"Could not find Flink job ({job_id})")
        self.job_id = job_id
