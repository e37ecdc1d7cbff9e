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
        text = str(job_id)
        # ``cls(str(exc))`` rebuilds the same message (the RPC codec re-raises it that way)
        prefix = "Could not find Flink job ("
        if text.startswith(prefix) and text.endswith(")"):
            text = text[len(prefix):-1]
        super().__init__(f"{prefix}{text})")
        self.job_id = text
