"""The collect coordinator of a STREAMING job's ``execute_and_collect`` (no Spark: the sink
subtasks' partitions are written here as the streaming task writes them)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from flintlock.runtime.dispatcher.collect_coordinator import CollectCoordinator, CollectResponse
from flintlock.runtime.shuffle.pipelined import (
    ARROW,
    PipelinedPartitionWriter,
    collect_partition_uri,
)
from flintlock.runtime.spark.arrow_segments import write_arrow_file


def _writer(root: Path, subtask: int, attempt: int = 0, backlog: int = 4) -> PipelinedPartitionWriter:
    return PipelinedPartitionWriter(collect_partition_uri(str(root), "sink", subtask, attempt),
                                    1, 1, backlog)


def _emit(writer: PipelinedPartitionWriter, values: list[int]) -> None:
    rows, size = write_arrow_file(pa.table({"v": values}), f"{writer.segment_uri()}/sp=0.arrow")
    writer.commit((rows,), (size,), format=ARROW)


def _values(response: CollectResponse) -> list[list[int]]:
    return [pa.ipc.open_file(pa.BufferReader(b)).read_all().column("v").to_pylist()
            for b in response.batches]


def test_batches_are_handed_out_by_offset_and_end_after_the_job_finished(tmp_path: Path) -> None:
    a, b = _writer(tmp_path, 0), _writer(tmp_path, 1)
    coordinator = CollectCoordinator(str(tmp_path / "sink"))
    assert coordinator.fetch(0, job_finished=False) == CollectResponse(0)
    _emit(a, [1, 2])
    _emit(b, [3])
    first = coordinator.fetch(0, job_finished=False)
    assert first.offset == 0 and sorted(_values(first)) == [[1, 2], [3]] and not first.end
    # the client lost the answer: asking again from 0 gets the same batches
    assert coordinator.fetch(0, job_finished=False) == first
    _emit(a, [4])
    a.commit(end=True)
    b.commit(end=True)
    second = coordinator.fetch(2, job_finished=False)
    assert second.offset == 2 and _values(second) == [[4]] and not second.end
    last = coordinator.fetch(3, job_finished=True)
    assert last == CollectResponse(3, (), end=True)
    with pytest.raises(ValueError, match="outside the batches handed out"):
        coordinator.fetch(1, job_finished=True)  # before what the client acknowledged
    with pytest.raises(ValueError, match="outside"):
        coordinator.fetch(9, job_finished=True)
    coordinator.release()
    assert not (tmp_path / "sink").exists()


def test_a_client_that_does_not_read_back_pressures_the_sink(tmp_path: Path) -> None:
    writer = _writer(tmp_path, 0, backlog=2)
    coordinator = CollectCoordinator(str(tmp_path / "sink"), max_bytes=1)
    for i in range(2):
        _emit(writer, [i])
    assert not writer.has_credit()
    held = coordinator.fetch(0, job_finished=False)
    assert _values(held) == [[0]]  # holds at most max_bytes (at least one batch)
    assert writer.has_credit()  # the batch it read was acknowledged to the sink
    _emit(writer, [2])
    assert _values(coordinator.fetch(0, job_finished=False)) == [[0]]  # nothing more while held
    assert _values(coordinator.fetch(1, job_finished=False)) == [[1]]


def test_a_restart_after_rows_were_handed_out_is_a_failure(tmp_path: Path) -> None:
    coordinator = CollectCoordinator(str(tmp_path / "sink"))
    early = _writer(tmp_path, 0, attempt=0)
    _writer(tmp_path, 0, attempt=1)  # restarted before anything was read: silently replaced
    assert coordinator.fetch(0, job_finished=False).failure == ""
    _emit(early, [1])  # the replaced attempt's rows are never read
    later = _writer(tmp_path, 0, attempt=1)
    _emit(later, [7])
    assert _values(coordinator.fetch(0, job_finished=False)) == [[7]]
    _writer(tmp_path, 0, attempt=2)
    failed = coordinator.fetch(1, job_finished=False)
    assert "subtask 0 restarted (attempt 2) after its rows were returned" in failed.failure
    assert not failed.end


def test_responses_travel_as_json() -> None:
    response = CollectResponse(4, (b"\x00\x01", b"xyz"), end=True, failure="")
    assert CollectResponse.from_json(response.to_json()) == response
