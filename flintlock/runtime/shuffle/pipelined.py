"""PIPELINED result partitions: append-only segments read while they are produced (pure ``pyarrow.fs``).

Layout of one producer attempt's partition (ARCHITECTURE section 4b)::

    <uri>/seg-<n>/sp=<k>/*.parquet     segment n, written by Spark's partitionBy("sp"), or
    <uri>/seg-<n>/sp=<k>.arrow         segment n as Arrow IPC files (``format: "arrow"``, written
                                       through the TaskManager: ``spark.arrow_segments``)
    <uri>/_commits/<n>.json            commit record of segment n (atomic rename): rows and bytes
                                       per subpartition, schema, watermark, end-of-partition
    <uri>/_acks/<consumer>.json        how many segments consumer subtask <consumer> has consumed

A segment is visible to consumers only once its commit record exists, so a reader never sees a
half-written segment. The last record has ``end: true`` (end of partition, Flink's
``EndOfPartitionEvent``); it may carry data. Consumers acknowledge after the output computed from
the segments is committed downstream.

Backpressure (Flink's credit-based flow control, ``taskmanager.network.memory.buffers-per-channel``
+ ``floating-buffers-per-gate`` credits, a segment standing for a network buffer): a producer may
have at most ``max_backlog`` committed segments that its slowest consumer subtask has not
acknowledged; ``PipelinedPartitionWriter.backlog`` tells it how far ahead it is. A segment is an
epoch's output, often far larger than Flink's 32 KiB buffer, so the floating credits also count
bytes, as Flink's buffers bound the data in flight: beyond the ``exclusive`` segments (always
granted), a producer commits another only while every consumer has less than ``max_bytes`` of its
subpartitions' data unacknowledged (``has_credit``). Each acknowledgement names the consumer's
subpartition range.

Checkpoint barriers (issue 12) are data-less commit records with ``barrier: n`` (and the
checkpoint's ``location``), committed after everything the producer emitted before its snapshot.
A reader that meets barrier n on a channel records it (``channel.barrier``); when it aligns
(EXACTLY_ONCE) the channel is blocked, so ``poll`` reads nothing more from it, until the
consumer has taken its own snapshot (``unblock``). With aligned barriers nothing is in flight at
barrier n, so a restarted region starts with empty partitions.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from flintlock.runtime.shuffle.layout import filesystem_and_path, release_partitions

__all__ = [
    "ARROW",
    "ARROW_SUFFIX",
    "PARQUET",
    "PipelinedPartitionReader",
    "PipelinedPartitionWriter",
    "SegmentCommit",
    "collect_partition_uri",
    "collect_root",
    "combined_watermark",
    "default_pipelined_root",
    "pipelined_partition_uri",
    "release_job_partitions",
    "segment_uri",
    "state_uri",
]

_COMMITS = "_commits"
#: segment formats (``SegmentCommit.format``)
PARQUET, ARROW = "parquet", "arrow"
#: the file name suffix of an ARROW segment's subpartition files
ARROW_SUFFIX = ".arrow"
#: the watermark at the end of input (Flink's ``Watermark.MAX_WATERMARK``, Long.MAX_VALUE)
MAX_WATERMARK = 2**63 - 1
_ACKS = "_acks"


_process_root: str | None = None


def default_pipelined_root() -> str:
    """This process's directory for PIPELINED partitions when ``shuffle.storage-dir`` is unset:
    created on first use, removed when the process exits. The JobMaster names partitions under
    it; TaskManagers on the same host write and read them there."""
    global _process_root
    if _process_root is None:
        _process_root = tempfile.mkdtemp(prefix="flintlock-pipelined-")
        atexit.register(shutil.rmtree, _process_root, True)
    return _process_root


def release_job_partitions(root: str, job_id: object) -> None:
    """Delete a job's PIPELINED partitions and operator state tables (when the job reached a
    terminal state)."""
    release_partitions([f"{root.rstrip('/')}/{job_id}/pipelined",
                        f"{root.rstrip('/')}/{job_id}/state"])


def collect_root(root: str, job_id: object) -> str:
    """The directory of a STREAMING job's collect sink partitions: ``<root>/<job>/collect``."""
    return f"{root.rstrip('/')}/{job_id}/collect"


def collect_partition_uri(collect_root_uri: str, sink_uid: str, subtask: int, attempt: int) -> str:
    """The PIPELINED partition (one subpartition, one consumer: the JobManager's collect
    coordinator) of one collect sink subtask attempt:
    ``<collect root>/<sink uid>/<subtask>/<attempt number>``."""
    return f"{collect_root_uri.rstrip('/')}/{sink_uid}/{subtask}/{attempt}"


def state_uri(root: str, job_id: object, vertex_id: object, attempt_id: object) -> str:
    """The directory of one subtask attempt's operator state tables (STREAMING):
    ``<root>/<job>/state/<vertex>/<subtask>-<attempt number>-<nonce>``."""
    index = getattr(attempt_id, "subtask_index", 0)
    attempt = getattr(attempt_id, "attempt_number", 0)
    return f"{root.rstrip('/')}/{job_id}/state/{vertex_id}/{index}-{attempt}-{uuid.uuid4().hex[:8]}"


def pipelined_partition_uri(root: str, job_id: object, partition_id: object, attempt_id: object) -> str:
    """The directory of one producer attempt's PIPELINED partition (no trailing slash).

    ``<root>/<job>/pipelined/<dataset>/<partition number>-<attempt number>-<nonce>``; computed by
    the JobMaster when it deploys the producer and its consumers together (eager scheduling).
    """
    dataset = getattr(partition_id, "dataset_id", partition_id)
    number = getattr(partition_id, "partition_number", 0)
    attempt = getattr(attempt_id, "attempt_number", 0)
    nonce = getattr(attempt_id, "nonce", "") or "x"
    return f"{root.rstrip('/')}/{job_id}/pipelined/{dataset}/{number}-{attempt}-{nonce}"


def segment_uri(uri: str, n: int) -> str:
    """Where segment ``n`` of the partition at ``uri`` is written."""
    return f"{uri.rstrip('/')}/seg-{n:08d}"


@dataclass(frozen=True)
class SegmentCommit:
    """The commit record of one segment.

    Attributes:
        segment: its number (0, 1, ...).
        rows: rows per subpartition index.
        bytes: stored bytes per subpartition index.
        schema: the rows' schema as a Spark DDL string (``""`` when the segment is empty).
        end: the last segment of the partition.
        watermark: the producer's output watermark after this segment (ms), or None.
        idle: the producer is idle (Flink's ``WatermarkStatus.IDLE``): its channel does not hold
            back the consumers' watermark until it commits a segment that is not idle.
        format: how the data is stored: ``"parquet"`` (a Spark-written directory per
            subpartition) or ``"arrow"`` (one Arrow IPC file per subpartition).
        barrier: checkpoint barrier n (a record without data), or None.
        location: the directory of checkpoint ``barrier`` (where snapshots are copied).
        stopped: an ``end`` because the job stops with a savepoint without draining (Flink's
            ``SavepointType.suspend``): consumers end too, without firing windows or timers.
    """

    segment: int
    rows: tuple[int, ...]
    bytes: tuple[int, ...]
    schema: str = ""
    end: bool = False
    watermark: int | None = None
    idle: bool = False
    format: str = PARQUET
    barrier: int | None = None
    location: str = ""
    stopped: bool = False

    def to_json(self) -> str:
        d = {"segment": self.segment, "rows": list(self.rows), "bytes": list(self.bytes),
             "schema": self.schema, "end": self.end, "watermark": self.watermark,
             "idle": self.idle, "format": self.format}
        if self.barrier is not None:
            d.update(barrier=self.barrier, location=self.location)
        if self.stopped:
            d["stopped"] = True
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> SegmentCommit:
        d = json.loads(text)
        return cls(int(d["segment"]), tuple(int(r) for r in d["rows"]),
                   tuple(int(b) for b in d["bytes"]), str(d.get("schema") or ""),
                   bool(d.get("end")), None if d.get("watermark") is None else int(d["watermark"]),
                   bool(d.get("idle")), str(d.get("format") or PARQUET),
                   None if d.get("barrier") is None else int(d["barrier"]),
                   str(d.get("location") or ""), bool(d.get("stopped")))


def _write_atomically(fs: pafs.FileSystem, path: str, text: str) -> None:
    parent = path.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    tmp = f"{parent}/.{os.path.basename(path)}.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(text.encode())
    fs.move(tmp, path)


def _read_text(fs: pafs.FileSystem, path: str) -> str | None:
    """The file's text, or None when it does not exist. A file being replaced (pyarrow's local
    ``move`` is not always one atomic rename) can vanish between a failed open and the check
    that follows; the open is then tried again."""
    for attempt in range(5):
        try:
            with fs.open_input_stream(path) as fh:
                return bytes(fh.read()).decode()
        except (FileNotFoundError, OSError):
            if fs.get_file_info(path).type == pafs.FileType.NotFound:
                return None  # not there (yet): an ack counts as 0, a commit as not committed
            if attempt == 4:
                raise
    return None


class PipelinedPartitionWriter:
    """The producer side of one PIPELINED partition.

    Args:
        uri: the partition directory (``pipelined_partition_uri``).
        number_of_subpartitions: N (rows/bytes lists have this length).
        number_of_consumers: consumer subtasks that acknowledge (the consumer vertex's
            parallelism); backpressure follows the slowest.
        max_backlog: committed but unacknowledged segments allowed (>= 1).
        exclusive: of those, how many are granted whatever their size (at least 1; default:
            all of them).
        max_bytes: the further ones only while each consumer has less than this many bytes
            (stored, of its subpartitions) unacknowledged; None: no byte bound.

    Raises:
        ValueError: ``max_backlog`` below 1, ``max_bytes`` below 0.
    """

    def __init__(self, uri: str, number_of_subpartitions: int, number_of_consumers: int,
                 max_backlog: int, *, exclusive: int | None = None,
                 max_bytes: int | None = None) -> None:
        if max_backlog < 1:
            raise ValueError(f"max_backlog must be >= 1, got {max_backlog}")
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.uri = uri.rstrip("/")
        self.number_of_subpartitions = max(1, number_of_subpartitions)
        self.number_of_consumers = max(1, number_of_consumers)
        self.max_backlog = max_backlog
        self.exclusive = max_backlog if exclusive is None else min(max(1, exclusive), max_backlog)
        self.max_bytes = max_bytes
        #: stored bytes per subpartition of the committed segments not yet acknowledged by all
        self._sizes: dict[int, tuple[int, ...]] = {}
        self.next_segment = 0
        self.ended = False
        self._fs, self._path = filesystem_and_path(self.uri)
        self._fs.create_dir(f"{self._path}/{_COMMITS}", recursive=True)

    def segment_uri(self) -> str:
        """Where the next segment's data goes (Spark writes it, then ``commit``)."""
        return segment_uri(self.uri, self.next_segment)

    def commit(self, rows: Sequence[int] = (), sizes: Sequence[int] = (), *, schema: str = "",
               end: bool = False, watermark: int | None = None,
               idle: bool = False, format: str = PARQUET, stopped: bool = False) -> SegmentCommit:
        """Make the next segment visible by writing its commit record.

        Args:
            rows, sizes: rows and stored bytes per subpartition of the data written under
                ``segment_uri()`` (empty: a record without data, e.g. a bare end marker).
            schema: the rows' DDL schema.
            end: this is the partition's last segment.
            watermark: the output watermark after this segment (ms).
            idle: the producer is idle (see ``SegmentCommit``).
            format: how the segment's data is stored (``PARQUET`` or ``ARROW``).
            stopped: with ``end``: the job stops with a savepoint, no drain (``SegmentCommit``).

        Raises:
            RuntimeError: the partition already ended.
            ValueError: ``rows``/``sizes`` do not have one entry per subpartition.
        """
        if self.ended:
            raise RuntimeError(f"partition {self.uri} already ended")
        if format not in (PARQUET, ARROW):
            raise ValueError(f"unknown segment format {format!r}: expected {PARQUET!r} or {ARROW!r}")
        n_sub = self.number_of_subpartitions
        rows = tuple(rows) or (0,) * n_sub
        sizes = tuple(sizes) or (0,) * n_sub
        if len(rows) != n_sub or len(sizes) != n_sub:
            raise ValueError(f"expected {n_sub} subpartition counts, got {len(rows)} and {len(sizes)}")
        return self._write(SegmentCommit(self.next_segment, tuple(rows), tuple(sizes), schema,
                                         end, watermark, idle, format,
                                         stopped=stopped and end))

    def commit_barrier(self, checkpoint_id: int, location: str) -> SegmentCommit:
        """Emit checkpoint barrier ``checkpoint_id`` (a record without data) after everything
        committed so far.

        Raises:
            RuntimeError: the partition already ended.
        """
        if self.ended:
            raise RuntimeError(f"partition {self.uri} already ended")
        n_sub = self.number_of_subpartitions
        return self._write(SegmentCommit(self.next_segment, (0,) * n_sub, (0,) * n_sub,
                                         barrier=checkpoint_id, location=location))

    def _write(self, record: SegmentCommit) -> SegmentCommit:
        n = record.segment
        _write_atomically(self._fs, f"{self._path}/{_COMMITS}/{n:08d}.json", record.to_json())
        if self.max_bytes is not None and any(record.bytes):
            self._sizes[n] = record.bytes
        self.next_segment = n + 1
        self.ended = record.end
        return record

    def acknowledged(self) -> list[int]:
        """Segments consumed so far, per consumer subtask index (0 when it has not acked)."""
        return [consumed for consumed, _ in self._acks()]

    def _acks(self) -> list[tuple[int, tuple[int, int]]]:
        """Per consumer: (segments consumed, its subpartition range; all before its first
        acknowledgement)."""
        out = []
        everything = (0, self.number_of_subpartitions - 1)
        for c in range(self.number_of_consumers):
            text = _read_text(self._fs, f"{self._path}/{_ACKS}/{c}.json")
            ack = json.loads(text) if text else {}
            span = ack.get("subpartitions") or everything
            out.append((int(ack.get("consumed", 0)), (int(span[0]), int(span[1]))))
        return out

    def backlog(self) -> int:
        """Committed segments the slowest consumer has not acknowledged."""
        return self.next_segment - min(self.acknowledged())

    def has_credit(self) -> bool:
        """Whether one more segment may be committed: fewer than ``exclusive`` unacknowledged
        segments, or fewer than ``max_backlog`` while no consumer has ``max_bytes`` or more of
        its data unacknowledged."""
        acks = self._acks()
        oldest = min(consumed for consumed, _ in acks)
        for n in [n for n in self._sizes if n < oldest]:
            del self._sizes[n]
        backlog = self.next_segment - oldest
        if backlog < self.exclusive:
            return True
        if backlog >= self.max_backlog:
            return False
        if self.max_bytes is None:
            return True
        return all(self.unacknowledged_bytes(consumed, span) < self.max_bytes
                   for consumed, span in acks)

    def unacknowledged_bytes(self, consumed: int, span: tuple[int, int]) -> int:
        """Stored bytes of subpartitions ``span`` (inclusive) in segments ``consumed..``."""
        return sum(sum(sizes[span[0]:span[1] + 1]) for n, sizes in self._sizes.items()
                   if n >= consumed)


@dataclass
class _Channel:
    uri: str
    next_segment: int = 0
    ended: bool = False
    #: ended by a stop-with-savepoint without drain (``SegmentCommit.stopped``)
    stopped: bool = False
    watermark: int | None = None
    idle: bool = False
    #: the newest checkpoint barrier delivered on this channel, and where its checkpoint goes
    barrier: int | None = None
    location: str = ""
    #: aligning (EXACTLY_ONCE): nothing more is read from it until ``unblock``
    blocked: bool = False


@dataclass(frozen=True)
class ReadableSegment:
    """A committed segment of one input channel: its data for the gate's range (``dirs``:
    Parquet directories or Arrow IPC files, as ``commit.format`` says)."""

    channel: int
    commit: SegmentCommit
    dirs: tuple[str, ...]
    rows: int
    bytes: int

    @property
    def format(self) -> str:
        return self.commit.format


@dataclass
class PipelinedPartitionReader:
    """The consumer side of one input gate over PIPELINED partitions (one channel per producer).

    Args:
        uris: the producers' partition directories, in producer subtask order.
        consumer_index: this consumer subtask's index (its ack file).
        subpartition_start, subpartition_end: the gate's subpartition range (inclusive).
    """

    uris: Sequence[str]
    consumer_index: int
    subpartition_start: int
    subpartition_end: int
    channels: list[_Channel] = field(init=False)
    #: the rows' DDL schema, from the first commit record that named one ("" until then)
    schema: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.channels = [_Channel(u.rstrip("/")) for u in self.uris]

    @property
    def ended(self) -> bool:
        """Every channel delivered its end-of-partition record."""
        return all(c.ended for c in self.channels)

    @property
    def stopped(self) -> bool:
        """A channel ended because the job stops with a savepoint without draining."""
        return any(c.stopped for c in self.channels)

    def poll(self, max_segments_per_channel: int, align: bool = False,
             max_bytes: int | None = None) -> list[ReadableSegment]:
        """The newly committed segments (up to the bound per channel), in order per channel.

        ``max_bytes``: per channel, a segment after the first is taken only while the bytes
        taken stay within it (what a producer's credits let be in flight; None: no bound).

        A barrier record is taken (``channel.barrier``) but not returned; with ``align`` its
        channel is then blocked (nothing more is read from it until ``unblock``)."""
        out: list[ReadableSegment] = []
        for i, ch in enumerate(self.channels):
            fs, path = filesystem_and_path(ch.uri)
            taken = taken_bytes = 0
            while not ch.ended and not ch.blocked and taken < max_segments_per_channel:
                text = _read_text(fs, f"{path}/{_COMMITS}/{ch.next_segment:08d}.json")
                if text is None:
                    break
                commit = SegmentCommit.from_json(text)
                if commit.barrier is not None:
                    ch.next_segment += 1
                    ch.barrier, ch.location, ch.blocked = commit.barrier, commit.location, align
                    continue
                self.schema = self.schema or commit.schema
                dirs, rows, size = [], 0, 0
                for k in range(self.subpartition_start, self.subpartition_end + 1):
                    if k < len(commit.rows) and commit.rows[k] > 0:
                        suffix = ARROW_SUFFIX if commit.format == ARROW else ""
                        dirs.append(f"{segment_uri(ch.uri, commit.segment)}/sp={k}{suffix}")
                        rows += commit.rows[k]
                        size += commit.bytes[k]
                if max_bytes is not None and taken and taken_bytes + size > max_bytes:
                    break  # the next epoch takes it
                taken_bytes += size
                out.append(ReadableSegment(i, commit, tuple(dirs), rows, size))
                ch.next_segment += 1
                ch.ended, ch.stopped = commit.end, commit.stopped
                if commit.watermark is not None:
                    ch.watermark = commit.watermark if ch.watermark is None else max(
                        ch.watermark, commit.watermark)
                ch.idle = commit.idle
                taken += 1
        return out

    def unblock(self, up_to_barrier: int | None = None) -> None:
        """Resume reading the channels blocked at a barrier (all, or those at a barrier
        ``<= up_to_barrier``)."""
        for ch in self.channels:
            if ch.blocked and (up_to_barrier is None or (ch.barrier or 0) <= up_to_barrier):
                ch.blocked = False

    def acknowledge(self) -> None:
        """Tell every producer how many of its segments this consumer has consumed."""
        for ch in self.channels:
            fs, path = filesystem_and_path(ch.uri)
            _write_atomically(fs, f"{path}/{_ACKS}/{self.consumer_index}.json",
                              json.dumps({"consumed": ch.next_segment, "subpartitions":
                                          [self.subpartition_start, self.subpartition_end]}))

    def watermark(self) -> int | None:
        """The gate's watermark: ``combined_watermark([self])``."""
        return combined_watermark([self])


def combined_watermark(gates: Sequence[PipelinedPartitionReader]) -> int | None:
    """A task's input watermark over all channels of all its gates (Flink's
    ``StatusWatermarkValve``): the minimum over the active channels (not ended, not idle; all
    not-ended ones when every one is idle); None while an active channel has none;
    ``MAX_WATERMARK`` once every channel ended (end of input)."""
    channels = [c for g in gates for c in g.channels]
    live = [c for c in channels if not c.ended]
    if not live:
        return MAX_WATERMARK if channels else None
    active = [c for c in live if not c.idle] or live
    marks = [c.watermark for c in active]
    if any(m is None for m in marks):
        return None
    return min(marks)  # type: ignore[type-var]
