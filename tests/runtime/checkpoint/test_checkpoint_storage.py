"""Checkpoint metadata and storage: ``_metadata`` round trip, clear errors for a missing path,
a directory without ``_metadata``, corrupt metadata and an unwritable checkpoint directory;
source offsets that restore where a source stood; FileSink transactions published once."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock.connectors.datagen import DataGeneratorSource, GeneratorSplit
from flintlock.connectors.file import FileSink, FileSource, MonitoredFilesSplit
from flintlock.runtime.checkpoint import storage
from flintlock.runtime.checkpoint.snapshots import (
    CheckpointMetadataException,
    CompletedCheckpoint,
    OperatorStateHandle,
    TaskStateSnapshot,
)
from flintlock.runtime.spark.epoch_sources import GeneratorRange, epoch_source


def _checkpoint(tmp_path: Path) -> CompletedCheckpoint:
    state = TaskStateSnapshot(
        {"position": 42},
        (OperatorStateHandle(2, "opid", str(tmp_path / "s"), 7, "k string, n long", 1000, 1999,
                             None, None, 512),),
        {0: (str(tmp_path / "txn-00000"),)})
    return CompletedCheckpoint("job", 3, 1_000, 1_250, str(tmp_path / "job" / "chk-3"),
                               {"v1/0": state, "v1/1": TaskStateSnapshot(finished=True)})


def test_metadata_round_trips_through_the_file(tmp_path: Path) -> None:
    cp = _checkpoint(tmp_path)
    path = storage.write_metadata(cp)
    assert path.endswith("chk-3/_metadata")
    assert storage.read_checkpoint(cp.external_pointer) == cp
    assert storage.read_checkpoint(path) == cp  # the file itself works too
    assert cp.state_size == 512
    assert not [p for p in os.listdir(cp.external_pointer) if p.endswith(".tmp")]


def test_unreadable_checkpoints_are_named_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        storage.read_checkpoint(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no _metadata"):
        storage.read_checkpoint(str(tmp_path / "empty"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "_metadata").write_text("{not json")
    with pytest.raises(CheckpointMetadataException, match="not JSON"):
        storage.read_checkpoint(str(bad))
    (bad / "_metadata").write_text('{"version": 1, "job_id": "j"}')
    with pytest.raises(CheckpointMetadataException, match="incomplete or corrupt"):
        storage.read_checkpoint(str(bad))


def test_the_latest_readable_completed_checkpoint_is_found(tmp_path: Path) -> None:
    import dataclasses

    job = tmp_path / "job"
    assert storage.latest_checkpoint(str(job)) is None  # a new job: nothing yet
    for n in (3, 9):
        storage.write_metadata(dataclasses.replace(
            _checkpoint(tmp_path), checkpoint_id=n, external_pointer=str(job / f"chk-{n}")))
    (job / "chk-12").mkdir()  # pending: no _metadata yet
    (job / "chk-11").mkdir()
    (job / "chk-11" / "_metadata").write_text("{cut sho")  # corrupt
    (job / "chk-x").mkdir()
    latest = storage.latest_checkpoint(str(job))
    assert latest is not None and latest.checkpoint_id == 9  # 11 skipped, 12 incomplete
    assert latest.external_pointer == str(job / "chk-9")


def test_a_file_in_the_way_makes_the_checkpoint_directory_unwritable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="not writable.*state.checkpoints.dir"):
        storage.check_writable(str(tmp_path / "file" / "job"))


def test_a_restored_generator_continues_at_its_offset_and_paces_from_there() -> None:
    source = DataGeneratorSource(lambda i: (i,), 1000, None, "a long")
    first = epoch_source(source, (GeneratorSplit(0, 2, 1000),), max_records=100)
    first.next_epoch(0.0)
    first.next_epoch(0.1)
    assert first.offset() == {"position": 200}
    again = epoch_source(source, (GeneratorSplit(0, 2, 1000),), max_records=100)
    again.restore(first.offset())
    (split,) = again.next_epoch(50.0).splits
    assert isinstance(split, GeneratorRange) and (split.start, split.end) == (200, 300)


def test_a_restored_monitored_directory_does_not_read_its_files_again(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"a": [1]}), tmp_path / "in" / "one.parquet")
    source = FileSource.parquet(str(tmp_path / "in")).monitor_continuously(10)
    split = MonitoredFilesSplit(0, 1)
    first = epoch_source(source, (split,))
    assert len(first.next_epoch(0.0).splits) == 1
    again = epoch_source(source, (split,))
    again.restore(first.offset())
    pq.write_table(pa.table({"a": [2]}), tmp_path / "in" / "two.parquet")
    assert [s.path.rsplit("/", 1)[1] for s in again.next_epoch(1.0).splits] == ["two.parquet"]


def test_file_sink_transactions_are_published_once_with_unique_names(tmp_path: Path) -> None:
    sink = FileSink.parquet(str(tmp_path / "out"))
    sink.prepare("job")
    txn = Path(sink.temporary_dir("job", "attempt-a/txn-00000"))
    txn.mkdir(parents=True)
    pq.write_table(pa.table({"a": [1, 2]}), txn / "part-00000-u1-c000.snappy.parquet")
    (txn / "_SUCCESS").write_text("")
    assert sink.commit_transactions("job", [(1, str(txn))]) == 1
    assert sink.commit_transactions("job", [(1, str(txn))]) == 0  # idempotent
    names = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("_"))
    assert names == ["part-00001-00000-u1-c000.snappy.parquet"]
    # the job's final commit publishes the rest; release removes the temporary files
    later = Path(sink.temporary_dir("job", "attempt-a/txn-00001"))
    later.mkdir(parents=True)
    pq.write_table(pa.table({"a": [3]}), later / "part-00000-u2-c000.snappy.parquet")
    sink.commit("job", [sink.temporary_dir("job", "attempt-a")])
    assert sorted(pq.read_table(tmp_path / "out").column("a").to_pylist()) == [1, 2, 3]
    sink.release("job")  # the Dispatcher recorded the job's result
    assert not (tmp_path / "out" / "_temporary").exists()
