"""Barrier alignment of a subtask with input channels (pure; no I/O of its own).

Follows Flink ``runtime/io/checkpointing/SingleCheckpointBarrierHandler`` (aligned, EXACTLY_ONCE)
and ``CheckpointBarrierTracker`` (AT_LEAST_ONCE). The input gates' readers
(``shuffle.pipelined.PipelinedPartitionReader``) record the newest barrier per channel and, when
aligning, block a channel once it delivered one. ``BarrierAligner.ready()`` says which checkpoint
the subtask may snapshot now:

- EXACTLY_ONCE: checkpoint n = the newest barrier delivered on any channel; ready when every
  channel that has not ended delivered n (blocked channels read nothing after their barrier, so
  the subtask's state holds exactly the records before barrier n). A newer barrier on one
  channel abandons an older alignment (its channels are released), as in Flink.
- AT_LEAST_ONCE: n = the oldest barrier not handled; ready when every channel that has not ended
  delivered n or a newer one; channels are never blocked, so records after the barrier may be in
  the state too (replayed after a restore: at least once).

An ended channel counts as aligned: everything it delivered precedes its end, hence the barrier.
``done(n)`` (snapshot taken) and ``abort(n)`` (the JobMaster aborted n) release the channels and
ignore barrier n and older from then on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BarrierAligner"]


class BarrierAligner:
    """See the module docstring.

    Args:
        readers: the subtask's input gate readers (their ``channels`` carry ``barrier``,
            ``location``, ``blocked`` and ``ended``).
        exactly_once: align (EXACTLY_ONCE) or only track (AT_LEAST_ONCE).
    """

    def __init__(self, readers: Sequence[Any], exactly_once: bool = True) -> None:
        self.readers = list(readers)
        self.exactly_once = exactly_once
        #: the newest checkpoint id snapshotted or aborted here (barriers <= it are ignored)
        self.handled = 0

    def _channels(self) -> list[Any]:
        return [c for r in self.readers for c in r.channels]

    def ready(self) -> tuple[int, str] | None:
        """``(checkpoint id, location)`` when the subtask may snapshot now, else None."""
        channels = self._channels()
        seen = [c.barrier for c in channels if c.barrier is not None and c.barrier > self.handled]
        if not seen:
            self._release(self.handled)  # barriers of handled checkpoints hold nothing back
            return None
        n = max(seen) if self.exactly_once else min(seen)
        if self.exactly_once:
            self._release(n - 1)  # an older alignment is abandoned
        if any(not c.ended and (c.barrier is None or c.barrier < n) for c in channels):
            return None
        location = next(c.location for c in channels if c.barrier is not None and c.barrier >= n)
        return n, location

    def done(self, checkpoint_id: int) -> None:
        """The snapshot of ``checkpoint_id`` was taken: release the channels."""
        self.handled = max(self.handled, checkpoint_id)
        self._release(self.handled)

    def abort(self, checkpoint_id: int) -> None:
        """``checkpoint_id`` was aborted: stop aligning it and release its channels."""
        self.done(checkpoint_id)

    def _release(self, up_to: int) -> None:
        for r in self.readers:
            r.unblock(up_to)
