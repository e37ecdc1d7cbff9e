"""What a streaming source subtask reads in each epoch, as splits for ``connector_io.read_source``.

A streaming source subtask runs its chain once per epoch over the splits of that epoch
(``streaming_task``). ``EpochSource.next_epoch(now_s)`` returns an ``Epoch``: the splits to read
now (possibly none), whether the source has ended, and how long to wait before asking again when
there was nothing to read. Pure apart from listing files; no Spark.

- ``DataGeneratorSource``: ``GeneratorRange(split, start, end)`` = positions ``[start, end)`` of
  the subtask's index sequence; rate-limited sources emit what is due since the subtask started
  (``rows_per_second / parallelism`` per second), at least ``min_interval_s`` apart (Flink's
  ``execution.buffer-timeout`` plays this role), unlimited ones ``max_records`` per epoch.
  What falls due while the previous epoch ran is emitted (Flink's source thread, busy emitting,
  finds its permits ready), plus at most one second's worth of a stall (back pressure, a slow
  start), as Flink's Guava rate limiter stores at most one second of permits. No epoch holds more
  than ``max_records``: what a rate-limited source could not emit for that bound stays due (it was
  busy, not stalled) and goes into its next epochs.
- A monitored ``FileSource``: the files that appeared since the last listing, listed at most every
  ``discovery_interval_ms``; each file is read once.
- ``SocketTextSource``: the complete lines that arrived since the last epoch
  (``socket_epochs``).
- Any other (bounded) source: all of the subtask's splits in the first epoch, then the end.

``estimated_bytes(splits)`` is what an epoch's splits are expected to hold in memory (None:
unknown), for the choice of the segment format (``streaming_task``).

Offsets (what a checkpoint records, JSON; ``offset()`` / ``restore(offset)``): the
generator's position (``{"position": n}``); the monitored source's files read (``{"seen":
[paths]}``); whether a bounded source was read (``{"done": true}``); a socket has none (``{}``:
what arrived is not replayable, as in Flink). A restored rate-limited generator paces itself from
its restored position (it does not make up for the time it was down).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flintlock.connectors.datagen import DataGeneratorSource, GeneratorSplit
from flintlock.connectors.file import FileSource, FileSplit, MonitoredFilesSplit
from flintlock.connectors.socket import SocketLines, SocketSplit, SocketTextSource

__all__ = ["Epoch", "EpochSource", "GeneratorRange", "epoch_source", "estimated_bytes"]

#: most records one generator epoch produces (an unlimited generator's epoch; a rate-limited one's
#: when it is behind its rate). An epoch is one Spark job per vertex, whose fixed cost (~0.15 CPU-s
#: on the embedded server) this bound amortizes: events at 400,000/s offered for 60 s reached
#: 230-242k/s with 200,000, 300-362k/s with this (docs/design.md, "Epoch size under overload")
MAX_EPOCH_RECORDS = 1_000_000
#: assumed in-memory bytes of a record of unknown size (generated, or held in state), and per
#: byte of a file (Parquet compresses ~4x)
ESTIMATED_ROW_BYTES = 128
FILE_EXPANSION = 4


@dataclass(frozen=True)
class GeneratorRange:
    """Positions ``[start, end)`` of ``split``'s index sequence (index = subtask + pos * p)."""

    split: GeneratorSplit
    start: int
    end: int


@dataclass(frozen=True)
class Epoch:
    """One epoch's input: ``splits`` to read, ``ended`` after them, ``wait_s`` when idle."""

    splits: tuple[Any, ...] = ()
    ended: bool = False
    wait_s: float = 0.0


class EpochSource:
    """What a source subtask reads next (``now_s``: a monotonic clock in seconds)."""

    def next_epoch(self, now_s: float, busy_s: float = 0.0) -> Epoch:
        """``busy_s``: how long the subtask's previous epoch ran (seconds)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the source holds open (a socket); called when the task ends."""

    def offset(self) -> dict[str, Any]:
        """Where the source stands after everything it returned so far (JSON-able)."""
        return {}

    def restore(self, offset: dict[str, Any]) -> None:
        """Continue from ``offset`` (an ``offset()`` of an earlier attempt)."""


class _WholeSplits(EpochSource):
    """A bounded source read whole in the first epoch."""

    def __init__(self, splits: tuple[Any, ...]) -> None:
        self.splits = splits
        self.done = False

    def next_epoch(self, now_s: float, busy_s: float = 0.0) -> Epoch:
        if self.done:
            return Epoch(ended=True)
        self.done = True
        return Epoch(self.splits, ended=True)

    def offset(self) -> dict[str, Any]:
        return {"done": self.done}

    def restore(self, offset: dict[str, Any]) -> None:
        self.done = bool(offset.get("done"))


@dataclass
class _GeneratorEpochs(EpochSource):
    split: GeneratorSplit
    rows_per_second: float | None
    started_s: float | None = None
    position: int = 0
    last_epoch_s: float = float("-inf")
    min_interval_s: float = 0.1
    max_records: int = MAX_EPOCH_RECORDS
    #: records that were due but left out of the last epoch by ``max_records``: still due
    carried: int = 0

    def next_epoch(self, now_s: float, busy_s: float = 0.0) -> Epoch:
        size = self.split.size()
        if size is not None and self.position >= size:
            return Epoch(ended=True)
        rate = None if self.rows_per_second is None else \
            self.rows_per_second / self.split.parallelism
        if self.started_s is None:  # a restored position counts as emitted at the start
            self.started_s = now_s - (self.position / rate if rate else 0.0)
        if rate is None:
            due = self.max_records
        else:
            if now_s - self.last_epoch_s < self.min_interval_s:
                return Epoch(wait_s=self.min_interval_s - (now_s - self.last_epoch_s))
            due = int((now_s - self.started_s) * rate) + 1 - self.position
            if due <= 0:
                return Epoch(wait_s=max(0.001, self.position / rate - (now_s - self.started_s)))
            # what fell due while the last epoch ran, plus at most one second's worth of a
            # stall (back pressure), as Flink's Guava rate limiter stores one second of permits
            burst = max(1, int(rate * (1.0 + max(0.0, busy_s)))) + self.carried
            if due > burst:
                self.started_s += (due - burst) / rate
                due = burst
            self.carried = max(0, due - self.max_records)
            due = min(due, self.max_records)
        end = self.position + due if size is None else min(size, self.position + due)
        epoch = Epoch((GeneratorRange(self.split, self.position, end),),
                      ended=size is not None and end >= size)
        self.position = end
        self.last_epoch_s = now_s
        return epoch

    def offset(self) -> dict[str, Any]:
        return {"position": self.position}

    def restore(self, offset: dict[str, Any]) -> None:
        self.position = int(offset.get("position", 0))


@dataclass
class _MonitoredFileEpochs(EpochSource):
    source: FileSource
    split: MonitoredFilesSplit
    seen: set[str] = field(default_factory=set)
    next_listing_s: float = float("-inf")

    def next_epoch(self, now_s: float, busy_s: float = 0.0) -> Epoch:
        interval_s = (self.source.discovery_interval_ms or 1000) / 1000.0
        if now_s < self.next_listing_s:
            return Epoch(wait_s=self.next_listing_s - now_s)
        self.next_listing_s = now_s + interval_s
        new = self.source.new_files(self.seen, self.split.subtask, self.split.parallelism)
        self.seen.update(f.path for f in new)
        if not new:
            return Epoch(wait_s=interval_s)
        return Epoch(tuple(new))

    def offset(self) -> dict[str, Any]:
        return {"seen": sorted(self.seen)}

    def restore(self, offset: dict[str, Any]) -> None:
        self.seen = set(offset.get("seen", ()))


def estimated_bytes(splits: tuple[Any, ...]) -> int | None:
    """The in-memory size an epoch's splits are expected to produce (bytes), None when unknown."""
    total = 0
    for split in splits:
        if isinstance(split, GeneratorRange):
            total += (split.end - split.start) * ESTIMATED_ROW_BYTES
        elif isinstance(split, SocketLines):
            total += sum(len(line) for line in split.lines)
        elif isinstance(split, FileSplit):
            total += split.size * FILE_EXPANSION
        else:
            return None
    return total


def epoch_source(source: Any, splits: tuple[Any, ...], min_interval_s: float = 0.1,
                 max_records: int = MAX_EPOCH_RECORDS) -> EpochSource:
    """The ``EpochSource`` of a subtask that reads ``source`` with its assigned ``splits``."""
    if isinstance(source, SocketTextSource):
        from flintlock.runtime.spark.socket_epochs import SocketEpochs

        if not any(isinstance(s, SocketSplit) for s in splits):
            return _WholeSplits(())  # subtasks other than the first read nothing
        return SocketEpochs(source, min_interval_s)
    if isinstance(source, DataGeneratorSource):
        generated = [s for s in splits if isinstance(s, GeneratorSplit)] or [GeneratorSplit(0, 1, 0)]
        return _GeneratorEpochs(generated[0], source.rate.rows_per_second,
                                min_interval_s=min_interval_s, max_records=max_records)
    if isinstance(source, FileSource) and source.discovery_interval_ms is not None:
        (monitored,) = [s for s in splits if isinstance(s, MonitoredFilesSplit)]
        return _MonitoredFileEpochs(source, monitored)
    return _WholeSplits(splits)
