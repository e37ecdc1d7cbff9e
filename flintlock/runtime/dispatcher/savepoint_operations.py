"""Savepoint operations of the Dispatcher: trigger ids and their outcome (Flink's REST
``AsynchronousOperation`` handling for ``/jobs/:jobid/savepoints`` and ``/jobs/:jobid/stop``).

``POST /jobs/:jobid/savepoints`` answers with a trigger id at once; the JobMaster takes the
savepoint in the background; ``GET /jobs/:jobid/savepoints/:triggerid`` reads the operation
here. The Dispatcher polls the JobMaster until the savepoint completed or failed
(``SavepointOperations.follow``), so the result stays known after the job ended (a savepoint
with ``cancel-job``). At most ``MAX_OPERATIONS`` outcomes are kept (oldest dropped), as Flink's
``CompletedOperationCache`` keeps them for a while.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from flintlock.exceptions import FlintlockException
from flintlock.runtime.ids import JobID

__all__ = ["SavepointOperation", "SavepointOperations", "UnknownOperationException"]

MAX_OPERATIONS = 1000
#: how often the outcome of a running savepoint is asked (seconds)
POLL_S = 0.1


class UnknownOperationException(FlintlockException):
    """No savepoint operation with this trigger id for this job."""


@dataclass
class SavepointOperation:
    """One savepoint request: ``status`` IN_PROGRESS, COMPLETED (``location``) or FAILED
    (``failure``)."""

    job_id: JobID
    trigger_id: str
    status: str = "IN_PROGRESS"
    location: str = ""
    failure: str = ""

    def to_json(self) -> dict[str, object]:
        """Flink's ``AsynchronousOperationResult`` of a ``SavepointInfo``."""
        if self.status == "IN_PROGRESS":
            return {"status": {"id": "IN_PROGRESS"}, "operation": None}
        operation: dict[str, object] = ({"location": self.location} if self.status == "COMPLETED"
                                        else {"failure-cause": {"class": "CheckpointException",
                                                                "stack-trace": self.failure,
                                                                "serialized-throwable": None}})
        return {"status": {"id": "COMPLETED"}, "operation": operation}


class SavepointOperations:
    """The Dispatcher's savepoint operations (see the module docstring)."""

    def __init__(self) -> None:
        self._ops: OrderedDict[str, SavepointOperation] = OrderedDict()

    def start(self, job_id: JobID) -> SavepointOperation:
        op = SavepointOperation(job_id, uuid.uuid4().hex)
        self._ops[op.trigger_id] = op
        while len(self._ops) > MAX_OPERATIONS:
            self._ops.popitem(last=False)
        return op

    def get(self, job_id: JobID, trigger_id: str) -> SavepointOperation:
        """Raises: UnknownOperationException: no such trigger id for ``job_id``."""
        op = self._ops.get(trigger_id)
        if op is None or op.job_id != job_id:
            raise UnknownOperationException(
                f"There is no savepoint operation with trigger id {trigger_id} for job {job_id}")
        return op

    @staticmethod
    async def follow(op: SavepointOperation, status: Callable[[], Awaitable[tuple[str, str]]],
                     written: Callable[[], Awaitable[bool]], deadline_s: float) -> None:
        """Poll ``status()`` until the savepoint left IN_PROGRESS. When the JobMaster cannot be
        asked any more (the job ended), the savepoint counts as completed iff its ``_metadata``
        was ``written()``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while op.status == "IN_PROGRESS":
            try:
                state, failure = await status()
            except Exception as exc:
                if await written():
                    state, failure = "COMPLETED", ""
                else:
                    state, failure = "FAILED", f"the job ended before the savepoint completed ({exc})"
            if state != "IN_PROGRESS":
                op.status, op.failure = state, failure
                return
            if loop.time() > end:
                op.status, op.failure = "FAILED", "the savepoint did not complete in time"
                return
            await asyncio.sleep(POLL_S)
