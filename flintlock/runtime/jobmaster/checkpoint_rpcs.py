"""The JobMaster's checkpoint and savepoint RPCs (a mixin of ``JobMaster``).

Acknowledgements and declines from tasks go to the job's ``CheckpointCoordinatorShell``;
savepoints follow Flink's ``JobMaster.triggerSavepoint`` / ``stopWithSavepoint``: the path is
answered at once and the outcome read with ``savepoint_status`` (a mailbox handler must not wait
for barriers).
"""

from __future__ import annotations

from typing import Any

from flintlock.config import options
from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot
from flintlock.runtime.ids import ExecutionAttemptID, JobID
from flintlock.runtime.jobmaster.checkpointing import (
    CheckpointCoordinatorShell,
    CheckpointException,
)

__all__ = ["JobMasterCheckpointRpcs"]


class JobMasterCheckpointRpcs:
    """Checkpoint RPC handlers of ``JobMaster`` (see the module docstring)."""

    job_id: JobID
    configuration: Any
    checkpointing: CheckpointCoordinatorShell | None

    async def acknowledge_checkpoint(self, job_id: JobID, attempt_id: ExecutionAttemptID,
                                     checkpoint_id: int, snapshot: TaskStateSnapshot) -> None:
        if job_id == self.job_id and self.checkpointing is not None and \
                isinstance(snapshot, TaskStateSnapshot):
            self.checkpointing.acknowledge(attempt_id, checkpoint_id, snapshot)

    async def trigger_savepoint(self, target_directory: str | None, cancel_job: bool) -> str:
        return self._start_savepoint(target_directory, cancel_job, "")

    async def stop_with_savepoint(self, target_directory: str | None, drain: bool) -> str:
        return self._start_savepoint(target_directory, False,
                                     "terminate" if drain else "suspend")

    def _start_savepoint(self, target_directory: str | None, cancel_job: bool, stop: str) -> str:
        if self.checkpointing is None:
            raise CheckpointException(f"job {self.job_id} is not a STREAMING job: savepoints "
                                      "are taken of streaming jobs only")
        directory = target_directory or self.configuration.get(options.SAVEPOINTS_DIR)
        if not directory:
            raise CheckpointException("No savepoint directory: give one (flintlock savepoint "
                                      "JOBID DIR) or set state.savepoints.dir")
        return self.checkpointing.trigger_savepoint(directory, cancel_job, stop)

    async def savepoint_status(self, location: str) -> tuple[str, str]:
        if self.checkpointing is None or location not in self.checkpointing.savepoint_results:
            return "FAILED", f"job {self.job_id} has no savepoint {location!r}"
        return self.checkpointing.savepoint_results[location]

    async def decline_checkpoint(self, job_id: JobID, attempt_id: ExecutionAttemptID,
                                 checkpoint_id: int, reason: str) -> None:
        if job_id == self.job_id and self.checkpointing is not None:
            self.checkpointing.decline(attempt_id, checkpoint_id, str(reason))
