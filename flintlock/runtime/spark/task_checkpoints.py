"""A streaming subtask's side of checkpoints (Flink ``SubtaskCheckpointCoordinatorImpl``).

The TaskExecutor hands RPCs over from its loop (``trigger``, ``notify_complete``,
``notify_aborted``; thread-safe); the task thread asks ``due()`` between epochs and, for each
checkpoint due, takes its snapshot and emits the barrier (``streaming_task``):

- a source subtask snapshots when the JobMaster triggered it: its offset is then the position
  after everything it committed so far;
- a subtask with inputs snapshots when its ``BarrierAligner`` says every channel delivered
  barrier n (EXACTLY_ONCE: the channels that delivered it were blocked meanwhile).

Sink transactions (Flink's two-phase-commit FileSink): a streaming FileSink's epochs append
their part files into the current transaction directory of the attempt
(``<attempt>/txn-<k>``); at barrier n the transaction is closed and every closed transaction not
yet known to be committed goes into the snapshot (pre-commit). The JobMaster publishes them when
checkpoint n completes; ``notify_complete(n)`` then forgets them. Files after the last completed
checkpoint are never published by a failed attempt (its directory is deleted with the job's
temporary files); a finishing attempt's remaining files are published with the job.

Stop-with-savepoint (Flink's synchronous savepoint): a source subtask triggered with ``stop``
(``"suspend"`` or ``"terminate"``) emits nothing after that barrier (``stopping``) until the
savepoint completed (``stop_outcome`` True: it ends, draining with ``terminate``) or was aborted
(False: it goes on).
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Sequence
from typing import Any, Protocol

from flintlock.runtime.checkpoint.barriers import BarrierAligner
from flintlock.runtime.checkpoint.snapshots import TaskStateSnapshot

__all__ = ["CheckpointResponder", "TaskCheckpoints"]

log = logging.getLogger(__name__)


class CheckpointResponder(Protocol):
    """Sends a subtask's checkpoint answers to its JobMaster (Flink ``CheckpointResponder``);
    thread-safe, non-blocking."""

    def acknowledge(self, attempt_id: Any, checkpoint_id: int, snapshot: TaskStateSnapshot) -> None: ...

    def decline(self, attempt_id: Any, checkpoint_id: int, reason: str) -> None: ...


class TaskCheckpoints:
    """See the module docstring.

    Args:
        exactly_once: EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE.
    """

    def __init__(self, exactly_once: bool = True) -> None:
        self.exactly_once = exactly_once
        #: set once the subtask's input gate readers exist (``set_inputs``; none for a source)
        self.aligner: BarrierAligner | None = None
        self._inbox: queue.SimpleQueue[tuple[str, int, str, str]] = queue.SimpleQueue()
        #: the current sink transaction number, and the closed ones not known committed:
        #: (closed at checkpoint n, sink index, directory)
        self.transaction = 0
        self.closed: list[tuple[int, int, str]] = []
        #: sink index -> directory written in the current transaction
        self.open: dict[int, str] = {}
        #: a source's stop-with-savepoint once triggered: (checkpoint id, "suspend" | "terminate")
        self.stopping: tuple[int, str] | None = None
        #: its outcome once known: True completed, False aborted
        self.stop_outcome: bool | None = None

    def set_inputs(self, readers: Sequence[Any]) -> None:
        """The subtask's input gate readers, whose barriers it aligns."""
        self.aligner = BarrierAligner(readers, self.exactly_once) if readers else None

    # ---- from the TaskExecutor (any thread) --------------------------------------------------------

    def trigger(self, checkpoint_id: int, location: str, stop: str = "") -> None:
        self._inbox.put(("trigger", checkpoint_id, location, stop))

    def notify_complete(self, checkpoint_id: int) -> None:
        self._inbox.put(("complete", checkpoint_id, "", ""))

    def notify_aborted(self, checkpoint_id: int) -> None:
        self._inbox.put(("abort", checkpoint_id, "", ""))

    # ---- task thread -------------------------------------------------------------------------------------

    def transaction_attempt(self, attempt_tag: str) -> str:
        """The ``attempt`` a FileSink writes under this epoch (``FileSink.temporary_dir``)."""
        return f"{attempt_tag}/txn-{self.transaction:05d}"

    def wrote(self, sink_index: int, directory: str) -> None:
        """A sink wrote part files into ``directory`` in the current transaction."""
        self.open[sink_index] = directory

    def due(self) -> list[tuple[int, str]]:
        """The checkpoints to snapshot now, oldest first: ``(checkpoint id, location)``."""
        triggered: list[tuple[int, str]] = []
        while True:
            try:
                kind, n, location, stop = self._inbox.get_nowait()
            except queue.Empty:
                break
            stopping = self.stopping[0] if self.stopping is not None else None
            if kind == "trigger":
                triggered.append((n, location))
                if stop and self.stopping is None:
                    self.stopping, self.stop_outcome = (n, stop), None
            elif kind == "complete":
                self.closed = [t for t in self.closed if t[0] > n]
                if stopping is not None and n >= stopping:
                    self.stop_outcome = True
            else:
                if n == stopping:
                    self.stop_outcome, self.stopping = False, None
                if self.aligner is not None:
                    self.aligner.abort(n)
        if self.aligner is not None:
            ready = self.aligner.ready()
            if ready is not None:
                triggered.append(ready)
        return sorted(triggered)

    def pre_commit(self, checkpoint_id: int) -> dict[int, tuple[str, ...]]:
        """Close the current sink transaction at barrier ``checkpoint_id``; every closed
        transaction not known committed, per sink index."""
        for sink_index, directory in sorted(self.open.items()):
            self.closed.append((checkpoint_id, sink_index, directory))
        self.open.clear()
        self.transaction += 1
        out: dict[int, list[str]] = {}
        for _, sink_index, directory in self.closed:
            out.setdefault(sink_index, []).append(directory)
        return {k: tuple(v) for k, v in out.items()}

    def done(self, checkpoint_id: int) -> None:
        """The snapshot of ``checkpoint_id`` was taken (or declined): release the inputs."""
        if self.aligner is not None:
            self.aligner.done(checkpoint_id)
