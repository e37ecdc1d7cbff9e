"""PIPELINED partitions (pure pyarrow.fs): segments become visible only when committed, consumers
read them in order within their subpartition range, acknowledgements bound the producer's backlog
(credit-based back pressure), end-of-partition ends the gate, watermarks are the channel minimum.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock.runtime.shuffle.pipelined import (
    MAX_WATERMARK,
    PipelinedPartitionReader,
    PipelinedPartitionWriter,
    SegmentCommit,
    combined_watermark,
    pipelined_partition_uri,
    release_job_partitions,
)


def _write_segment(writer: PipelinedPartitionWriter, rows_per_sp: dict[int, int]) -> tuple[list[int], list[int]]:
    """Write Spark-like ``sp=<k>`` files for the next segment; rows and bytes per subpartition."""
    rows = [0] * writer.number_of_subpartitions
    sizes = [0] * writer.number_of_subpartitions
    for k, n in rows_per_sp.items():
        d = Path(writer.segment_uri()) / f"sp={k}"
        d.mkdir(parents=True)
        pq.write_table(pa.table({"v": list(range(n))}), d / "part-0.parquet")
        rows[k] = n
        sizes[k] = (d / "part-0.parquet").stat().st_size
    return rows, sizes


def test_a_segment_is_read_once_committed_and_only_in_the_readers_range(tmp_path: Path) -> None:
    uri = pipelined_partition_uri(str(tmp_path), "job", "ds", "attempt")
    writer = PipelinedPartitionWriter(uri, number_of_subpartitions=3, number_of_consumers=2, max_backlog=4)
    low = PipelinedPartitionReader([uri], consumer_index=0, subpartition_start=0, subpartition_end=1)
    high = PipelinedPartitionReader([uri], consumer_index=1, subpartition_start=2, subpartition_end=2)

    rows, sizes = _write_segment(writer, {0: 5, 2: 7})
    assert low.poll(10) == [] and high.poll(10) == []  # written, not committed: invisible
    writer.commit(rows, sizes, schema="v bigint")

    (seg,) = low.poll(10)
    assert seg.rows == 5 and len(seg.dirs) == 1 and seg.dirs[0].endswith("seg-00000000/sp=0")
    assert pq.read_table(seg.dirs[0]).num_rows == 5
    (seg_high,) = high.poll(10)
    assert seg_high.rows == 7 and seg_high.dirs[0].endswith("sp=2")
    assert low.schema == "v bigint"
    assert low.poll(10) == []  # nothing new: each segment once


def test_backlog_follows_the_slowest_consumer_and_limits_credit(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    writer = PipelinedPartitionWriter(uri, 2, number_of_consumers=2, max_backlog=2)
    fast = PipelinedPartitionReader([uri], 0, 0, 0)
    slow = PipelinedPartitionReader([uri], 1, 1, 1)
    for _ in range(2):
        writer.commit(*_write_segment(writer, {0: 1, 1: 1}))
    assert writer.backlog() == 2 and not writer.has_credit()  # nobody acknowledged yet
    assert len(fast.poll(10)) == 2
    fast.acknowledge()
    assert writer.acknowledged() == [2, 0]
    assert not writer.has_credit()  # the slow consumer still holds both
    assert len(slow.poll(1)) == 1  # a reader takes at most what it is given
    slow.acknowledge()
    assert writer.backlog() == 1 and writer.has_credit()


def test_floating_credits_count_the_bytes_each_consumer_has_not_acknowledged(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    # 2 exclusive segments always; up to 4 while a consumer has < 100 bytes of its range unacked
    writer = PipelinedPartitionWriter(uri, 2, number_of_consumers=2, max_backlog=4, exclusive=2,
                                      max_bytes=100)
    low = PipelinedPartitionReader([uri], 0, 0, 0)
    high = PipelinedPartitionReader([uri], 1, 1, 1)
    writer.commit((1, 1), (30, 60))
    writer.commit((1, 1), (30, 60))
    assert writer.backlog() == 2
    # before any acknowledgement a consumer counts every subpartition: 180 bytes
    assert not writer.has_credit()
    low.poll(10)
    high.poll(10)
    low.acknowledge()
    high.acknowledge()
    assert writer.has_credit()
    writer.commit((1, 1), (30, 60))
    writer.commit((1, 1), (30, 0))
    # two segments ahead (no exclusive credit left); each consumer has 60 bytes unacked < 100
    assert writer.unacknowledged_bytes(2, (1, 1)) == 60
    assert writer.unacknowledged_bytes(2, (0, 0)) == 60
    assert writer.has_credit()
    writer.commit((1, 1), (50, 1))
    assert writer.unacknowledged_bytes(2, (0, 0)) == 110
    assert not writer.has_credit()  # the low consumer has 110 bytes >= 100 unacknowledged
    low.poll(10)
    low.acknowledge()  # only the high consumer (61 bytes) is behind now
    assert writer.backlog() == 3 and writer.has_credit()
    writer.commit((1, 1), (1, 1))
    assert writer.backlog() == 4 and not writer.has_credit()  # max_backlog, whatever the bytes


def test_exclusive_segments_are_granted_whatever_their_size(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    writer = PipelinedPartitionWriter(uri, 1, 1, max_backlog=10, exclusive=2, max_bytes=10)
    writer.commit((1,), (1_000_000,))
    assert writer.has_credit()  # one segment ahead, exclusive credit left
    writer.commit((1,), (1,))
    assert not writer.has_credit()  # floating credit needs < 10 bytes unacknowledged
    with pytest.raises(ValueError, match="max_bytes"):
        PipelinedPartitionWriter(str(tmp_path / "q"), 1, 1, 2, max_bytes=-1)


def test_a_reader_takes_segments_within_the_byte_bound_but_always_one(tmp_path: Path) -> None:
    uri = str(tmp_path / "p")
    writer = PipelinedPartitionWriter(uri, 1, 1, 10)
    for size in (500, 30, 30, 60):
        writer.commit((1,), (size,))
    reader = PipelinedPartitionReader([uri], 0, 0, 0)
    assert [s.bytes for s in reader.poll(10, max_bytes=100)] == [500]  # the first, however large
    assert [s.bytes for s in reader.poll(10, max_bytes=100)] == [30, 30]  # a 3rd would be 120
    assert [s.bytes for s in reader.poll(10, max_bytes=100)] == [60]
    assert reader.poll(10, max_bytes=100) == []


def test_end_of_partition_ends_the_gate_and_the_writer(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    wa = PipelinedPartitionWriter(a, 1, 1, 4)
    wb = PipelinedPartitionWriter(b, 1, 1, 4)
    gate = PipelinedPartitionReader([a, b], 0, 0, 0)
    wa.commit(*_write_segment(wa, {0: 3}), end=True)
    got = gate.poll(10)
    assert [s.channel for s in got] == [0] and not gate.ended
    wb.commit(end=True)  # a bare end marker: no data
    (marker,) = gate.poll(10)
    assert marker.dirs == () and marker.commit.end and gate.ended
    with pytest.raises(RuntimeError, match="already ended"):
        wa.commit()
    with pytest.raises(ValueError, match="subpartition counts"):
        PipelinedPartitionWriter(str(tmp_path / "c"), 2, 1, 1).commit([1], [1])


def test_the_gate_watermark_is_the_minimum_over_its_live_channels(tmp_path: Path) -> None:
    uris = [str(tmp_path / f"w{i}") for i in range(2)]
    writers = [PipelinedPartitionWriter(u, 1, 1, 8) for u in uris]
    gate = PipelinedPartitionReader(uris, 0, 0, 0)
    writers[0].commit(watermark=1_000)
    gate.poll(10)
    assert gate.watermark() is None  # channel 1 has not reported one
    writers[1].commit(watermark=400)
    writers[0].commit(watermark=2_000)
    gate.poll(10)
    assert gate.watermark() == 400
    writers[1].commit(end=True)
    gate.poll(10)
    assert gate.watermark() == 2_000  # an ended channel no longer holds the watermark back
    writers[0].commit(end=True)
    gate.poll(10)
    assert gate.watermark() == MAX_WATERMARK  # end of input: every window and timer may fire


def test_an_idle_channel_stops_holding_back_the_watermark_until_it_sends_again(tmp_path: Path) -> None:
    uris = [str(tmp_path / f"w{i}") for i in range(3)]
    writers = [PipelinedPartitionWriter(u, 1, 1, 8) for u in uris]
    gate = PipelinedPartitionReader(uris, 0, 0, 0)
    for w, mark in zip(writers, (5_000, 300, 7_000), strict=True):
        w.commit(watermark=mark)
    gate.poll(10)
    assert gate.watermark() == 300
    writers[1].commit(watermark=300, idle=True)  # Flink's WatermarkStatus.IDLE
    gate.poll(10)
    assert gate.watermark() == 5_000
    writers[1].commit([1], [10], schema="v bigint", watermark=6_000)  # active again
    writers[0].commit(watermark=4_000)  # a channel's watermark never goes back
    gate.poll(10)
    assert gate.watermark() == 5_000
    for w in writers:
        w.commit(watermark=1, idle=True)
    gate.poll(10)
    assert gate.watermark() == 5_000  # all idle: the minimum over all of them


def test_a_task_watermark_spans_its_gates_so_an_idle_gate_does_not_hold_it_back(
        tmp_path: Path) -> None:
    active = PipelinedPartitionWriter(str(tmp_path / "a"), 1, 1, 8)
    quiet = PipelinedPartitionWriter(str(tmp_path / "q"), 1, 1, 8)
    gates = [PipelinedPartitionReader([str(tmp_path / "a")], 0, 0, 0),
             PipelinedPartitionReader([str(tmp_path / "q")], 0, 0, 0)]
    active.commit(watermark=7_000)
    for g in gates:
        g.poll(10)
    assert combined_watermark(gates) is None  # the quiet gate has said nothing yet
    quiet.commit(idle=True)  # an idle source that never had a watermark
    for g in gates:
        g.poll(10)
    assert combined_watermark(gates) == 7_000
    active.commit(end=True)
    for g in gates:
        g.poll(10)
    assert combined_watermark(gates) is None  # only the idle channel is left, without a mark
    quiet.commit(end=True)
    for g in gates:
        g.poll(10)
    assert combined_watermark(gates) == MAX_WATERMARK


def test_commit_records_round_trip_and_job_partitions_are_released(tmp_path: Path) -> None:
    record = SegmentCommit(3, (1, 0), (10, 0), "v bigint", end=True, watermark=5, format="arrow")
    assert SegmentCommit.from_json(record.to_json()) == record
    uri = pipelined_partition_uri(str(tmp_path), "job1", "ds", "a")
    with pytest.raises(ValueError, match="unknown segment format 'orc'"):
        PipelinedPartitionWriter(uri, 1, 1, 1).commit(format="orc")
    PipelinedPartitionWriter(uri, 1, 1, 1).commit()
    assert (tmp_path / "job1" / "pipelined").exists()
    release_job_partitions(str(tmp_path), "job1")
    assert not (tmp_path / "job1" / "pipelined").exists()
    with pytest.raises(ValueError, match="max_backlog"):
        PipelinedPartitionWriter(uri, 1, 1, 0)
