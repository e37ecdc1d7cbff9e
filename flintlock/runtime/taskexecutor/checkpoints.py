"""The TaskExecutor's checkpoint RPCs and the responder its tasks answer through.

Follows Flink ``TaskExecutor.triggerCheckpoint`` / ``confirmCheckpoint`` / ``abortCheckpoint``
and ``RpcCheckpointResponder``. A mixin of ``TaskExecutor`` (uses its slot table, job
connections, ``post_from_thread`` and ``run_async``).
"""

from __future__ import annotations

import logging
from typing import Any

from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot
from flintlock.runtime.ids import ExecutionAttemptID, JobID
from flintlock.runtime.rpc.messages import ACK, Acknowledge
from flintlock.runtime.taskexecutor.exceptions import TaskSubmissionException

__all__ = ["TaskExecutorCheckpoints"]

log = logging.getLogger(__name__)


class _Responder:
    """A task's ``CheckpointResponder``: hands answers to the TaskExecutor's loop (any thread)."""

    def __init__(self, te: TaskExecutorCheckpoints, job_id: JobID) -> None:
        self._te, self._job_id = te, job_id

    def acknowledge(self, attempt_id: ExecutionAttemptID, checkpoint_id: int,
                    snapshot: TaskStateSnapshot) -> None:
        self._te.post_from_thread(self._te._send_checkpoint_answer, self._job_id,
                                  "acknowledge_checkpoint", attempt_id, checkpoint_id, snapshot)

    def decline(self, attempt_id: ExecutionAttemptID, checkpoint_id: int, reason: str) -> None:
        self._te.post_from_thread(self._te._send_checkpoint_answer, self._job_id,
                                  "decline_checkpoint", attempt_id, checkpoint_id, reason)


class TaskExecutorCheckpoints:
    """Checkpoint RPC handlers of ``TaskExecutor`` (see the module docstring)."""

    _table: Any
    _jobs: Any
    #: from ``RpcEndpoint``
    post_from_thread: Any
    run_async: Any

    def checkpoint_responder(self, job_id: JobID) -> _Responder:
        """The responder handed to the tasks of ``job_id``."""
        return _Responder(self, job_id)

    def _send_checkpoint_answer(self, job_id: JobID, method: str, *args: Any) -> None:
        job = self._jobs.get(job_id)
        if job is None or job.gateway is None:
            log.info("Dropping %s of job %s: no JobMaster connection.", method, job_id)
            return

        def done(_: Any, error: BaseException | None) -> None:
            if error is not None:
                log.warning("%s of job %s failed: %s", method, job_id, error)

        self.run_async(getattr(job.gateway, method)(job_id, *args), done)

    async def trigger_checkpoint(self, attempt_id: ExecutionAttemptID, checkpoint_id: int,
                                 timestamp_ms: int, location: str, stop: str = "") -> Acknowledge:
        if stop not in ("", "suspend", "terminate"):
            raise TaskSubmissionException(
                f"cannot trigger checkpoint {checkpoint_id}: unknown stop mode {stop!r} "
                "(expected '', 'suspend' or 'terminate')")
        task = self._table.task(attempt_id)
        if task is None or not task.trigger_checkpoint(checkpoint_id, location, stop):
            raise TaskSubmissionException(
                f"cannot trigger checkpoint {checkpoint_id} on {attempt_id}: the task is not "
                "running here")
        return ACK

    async def notify_checkpoint_complete(self, attempt_id: ExecutionAttemptID,
                                         checkpoint_id: int) -> None:
        task = self._table.task(attempt_id)
        if task is not None:
            task.notify_checkpoint(checkpoint_id, True)

    async def notify_checkpoint_aborted(self, attempt_id: ExecutionAttemptID,
                                        checkpoint_id: int) -> None:
        task = self._table.task(attempt_id)
        if task is not None:
            task.notify_checkpoint(checkpoint_id, False)
