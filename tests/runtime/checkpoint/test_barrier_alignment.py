"""Barriers through PIPELINED partitions: records, blocking while aligning, and the
``BarrierAligner``'s decisions (Flink ``AlignedCheckpointsTest`` / ``CheckpointBarrierTrackerTest``
cases), with real partition directories (pyarrow.fs, no Spark)."""

from __future__ import annotations

from pathlib import Path

from flintlock.runtime.checkpoint.barriers import BarrierAligner
from flintlock.runtime.shuffle.pipelined import (
    PipelinedPartitionReader,
    PipelinedPartitionWriter,
    SegmentCommit,
)


def _writers(tmp_path: Path, n: int = 2) -> list[PipelinedPartitionWriter]:
    return [PipelinedPartitionWriter(str(tmp_path / f"p{i}"), 1, 1, 100) for i in range(n)]


def _reader(writers: list[PipelinedPartitionWriter]) -> PipelinedPartitionReader:
    return PipelinedPartitionReader([w.uri for w in writers], 0, 0, 0)


def _data(w: PipelinedPartitionWriter) -> None:
    w.commit((5,), (50,), schema="a long")


def test_a_barrier_record_round_trips_and_carries_no_data() -> None:
    record = SegmentCommit(3, (0, 0), (0, 0), barrier=7, location="/cp/job/chk-7")
    again = SegmentCommit.from_json(record.to_json())
    assert again == record
    assert SegmentCommit.from_json(SegmentCommit(1, (1,), (2,)).to_json()).barrier is None


def test_exactly_once_blocks_a_channel_after_its_barrier_until_all_channels_delivered(
        tmp_path: Path) -> None:
    a, b = _writers(tmp_path)
    reader = _reader([a, b])
    aligner = BarrierAligner([reader], exactly_once=True)
    _data(a)
    a.commit_barrier(1, "/cp/chk-1")
    _data(a)  # after the barrier: must not be read before the snapshot
    _data(b)
    taken = reader.poll(10, align=True)
    assert [(s.channel, s.commit.segment) for s in taken] == [(0, 0), (1, 0)]
    assert reader.channels[0].blocked and aligner.ready() is None
    assert reader.poll(10, align=True) == []  # channel 0 stays blocked
    b.commit_barrier(1, "/cp/chk-1")
    assert reader.poll(10, align=True) == []
    assert aligner.ready() == (1, "/cp/chk-1")
    aligner.done(1)
    assert [(s.channel, s.commit.segment) for s in reader.poll(10, align=True)] == [(0, 2)]


def test_an_ended_channel_counts_as_aligned(tmp_path: Path) -> None:
    a, b = _writers(tmp_path)
    reader = _reader([a, b])
    aligner = BarrierAligner([reader])
    b.commit((1,), (1,), schema="a long", end=True)
    a.commit_barrier(4, "/cp/chk-4")
    reader.poll(10, align=True)
    assert aligner.ready() == (4, "/cp/chk-4")


def test_a_newer_barrier_abandons_an_older_alignment(tmp_path: Path) -> None:
    a, b = _writers(tmp_path)
    reader = _reader([a, b])
    aligner = BarrierAligner([reader])
    a.commit_barrier(1, "/cp/chk-1")
    b.commit_barrier(2, "/cp/chk-2")  # b's producer never emitted 1 (it was aborted)
    reader.poll(10, align=True)
    assert aligner.ready() is None  # aligning 2 now; channel a released to reach barrier 2
    assert not reader.channels[0].blocked and reader.channels[1].blocked
    a.commit_barrier(2, "/cp/chk-2")
    reader.poll(10, align=True)
    assert aligner.ready() == (2, "/cp/chk-2")


def test_an_aborted_checkpoint_releases_its_channels_and_its_late_barriers_are_ignored(
        tmp_path: Path) -> None:
    a, b = _writers(tmp_path)
    reader = _reader([a, b])
    aligner = BarrierAligner([reader])
    a.commit_barrier(1, "/cp/chk-1")
    reader.poll(10, align=True)
    aligner.abort(1)
    assert not reader.channels[0].blocked
    b.commit_barrier(1, "/cp/chk-1")
    _data(b)
    taken = reader.poll(10, align=True)
    assert aligner.ready() is None and not reader.channels[1].blocked
    assert taken == [] or all(s.channel == 1 for s in taken)
    assert [s.commit.segment for s in reader.poll(10, align=True)] == [1]


def test_at_least_once_never_blocks_and_snapshots_when_every_channel_passed_the_barrier(
        tmp_path: Path) -> None:
    a, b = _writers(tmp_path)
    reader = _reader([a, b])
    aligner = BarrierAligner([reader], exactly_once=False)
    a.commit_barrier(1, "/cp/chk-1")
    _data(a)
    taken = reader.poll(10, align=False)
    assert [s.commit.segment for s in taken] == [1]  # read past the barrier
    assert aligner.ready() is None
    b.commit_barrier(1, "/cp/chk-1")
    reader.poll(10, align=False)
    assert aligner.ready() == (1, "/cp/chk-1")
    aligner.done(1)
    assert aligner.ready() is None
