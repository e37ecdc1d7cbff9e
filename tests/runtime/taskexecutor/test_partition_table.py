from __future__ import annotations

from pathlib import Path

from flintlock.runtime.ids import IntermediateDataSetID, IntermediateResultPartitionID, JobID
from flintlock.runtime.taskexecutor.partition_table import PartitionTable, delete_partition_uris


def _pid() -> IntermediateResultPartitionID:
    return IntermediateResultPartitionID(IntermediateDataSetID.generate(), 0)


def test_tracking_per_job_and_release() -> None:
    table = PartitionTable()
    job, other = JobID.generate(), JobID.generate()
    p1, p2, empty = _pid(), _pid(), _pid()
    table.start_tracking(job, p1, "/tmp/a")
    table.start_tracking(job, p1, "/tmp/a")  # same attempt reported twice
    table.start_tracking(job, p2, "/tmp/b")
    table.start_tracking(other, empty, "")  # stores nothing, but is tracked
    assert table.is_tracking(other)
    assert table.stop_tracking(other, [empty]) == [] and not table.is_tracking(other)
    assert table.stop_tracking(job, [p1, _pid()]) == ["/tmp/a"]
    assert table.is_tracking(job)
    assert table.stop_tracking_job(job) == ["/tmp/b"]
    assert not table.is_tracking(job)


def test_delete_partition_uris_removes_directories_and_files(tmp_path: Path) -> None:
    d = tmp_path / "part"
    (d / "sp=0").mkdir(parents=True)
    (d / "sp=0" / "x.parquet").write_bytes(b"x")
    f = tmp_path / "single.parquet"
    f.write_bytes(b"y")
    assert delete_partition_uris([str(d), f"file://{f}", str(tmp_path / "missing")]) == []
    assert not d.exists() and not f.exists()
