"""FileSource split enumeration (pure) and FileSink two-phase semantics (tasks on Spark)."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock.connectors import (
    CollectionSource,
    CollectSink,
    FileSink,
    FileSource,
    FileSplit,
    PrintSink,
    SequenceSource,
    SinkException,
    SourceException,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "spark"))

from spark_task_helpers import ipc


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_directory_splits_balance_bytes_largest_first(tmp_path):
    sizes = {"a.csv": 100, "b.csv": 70, "c.csv": 50, "sub/d.csv": 40, "e.csv": 10}
    for name, size in sizes.items():
        _write(tmp_path / name, size)
    _write(tmp_path / "_SUCCESS", 0)
    _write(tmp_path / ".hidden.crc", 5)
    _write(tmp_path / "_temporary" / "x.csv", 5)
    splits = FileSource.csv(str(tmp_path)).enumerate_splits(2)
    names = [sorted(os.path.relpath(s.path, tmp_path) for s in part) for part in splits]
    # greedy: a(100)->0, b(70)->1, c(50)->1 (120), d(40)->0 (140), e(10)->1 (130)
    assert names == [["a.csv", "sub/d.csv"], ["b.csv", "c.csv", "e.csv"]]
    assert all(isinstance(s, FileSplit) for part in splits for s in part)
    assert sum(s.size for part in splits for s in part) == sum(sizes.values())


def test_more_subtasks_than_files_and_single_file_and_glob(tmp_path):
    _write(tmp_path / "one.json", 10)
    _write(tmp_path / "two.json", 20)
    _write(tmp_path / "other.txt", 5)  # a directory source reads every non-hidden file (as Spark)
    assert [len(p) for p in FileSource.json(str(tmp_path)).enumerate_splits(4)] == [1, 1, 1, 0]
    single = FileSource.parquet(str(tmp_path / "one.json")).enumerate_splits(1)
    assert single == [[FileSplit(str(tmp_path / "one.json"), 10)]]
    globbed = FileSource.json(str(tmp_path / "*.json")).enumerate_splits(1)[0]
    assert sorted(os.path.basename(s.path) for s in globbed) == ["one.json", "two.json"]
    uri = FileSource.text(f"file://{tmp_path}/one.json").enumerate_splits(1)[0]
    assert [s.size for s in uri] == [10]


def test_parallelism_inferred_from_the_files_bytes(tmp_path):
    for name, size in {"a.csv": 100, "b.csv": 70, "c.csv": 50, "d.csv": 40}.items():
        _write(tmp_path / name, size)
    source = FileSource.csv(str(tmp_path))
    # 260 bytes: 100 per subtask -> 3; within the bound and the number of files
    assert source.infer_parallelism(8, 100) == 3
    assert source.infer_parallelism(2, 100) == 2
    assert source.infer_parallelism(8, 1) == 4  # one file is one split
    assert source.infer_parallelism(8, 10_000) == 1
    monitored = FileSource.csv(str(tmp_path)).monitor_continuously(1000)
    assert monitored.infer_parallelism(3, 1) == 3
    with pytest.raises(SourceException, match="does not exist") as absolute:
        FileSource.csv(str(tmp_path / "missing")).infer_parallelism(2, 1)
    assert "relative path" not in str(absolute.value)


def test_a_missing_relative_path_names_the_directory_it_was_resolved_against(tmp_path,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SourceException, match="does not exist") as missing:
        FileSource.parquet("data/tpch/part").list_files()
    assert f"resolved against {str(tmp_path)!r}" in str(missing.value)
    with pytest.raises(SourceException, match="relative path"):
        FileSource.parquet("data/*/part").list_files()  # a glob whose base is missing


def test_the_splits_reuse_the_listing_the_inference_made(tmp_path, monkeypatch):
    """The JobMaster asks a dynamic source for its parallelism, then for its splits: one LIST
    of the path (object stores charge per request), and a later enumeration lists again."""
    for name, size in {"a.csv": 100, "b.csv": 70}.items():
        _write(tmp_path / name, size)
    source = FileSource.csv(str(tmp_path))
    listings = []
    real = FileSource.list_files
    monkeypatch.setattr(FileSource, "list_files", lambda self: listings.append(1) or real(self))
    assert source.infer_parallelism(8, 100) == 2
    assert [len(s) for s in source.enumerate_splits(2)] == [1, 1]
    assert len(listings) == 1
    _write(tmp_path / "c.csv", 10)  # e.g. a restarted job enumerates what is there now
    assert sum(len(s) for s in source.enumerate_splits(2)) == 3 and len(listings) == 2
    assert "_listing" not in repr(source) and source == FileSource.csv(str(tmp_path))


def test_missing_path_is_a_non_recoverable_source_exception(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(SourceException, match="nope") as info:
        FileSource.parquet(missing).enumerate_splits(2)
    assert SerializedError.from_exception(info.value).non_recoverable
    with pytest.raises(SourceException, match="no files match"):
        FileSource.csv(str(tmp_path / "*.csv")).enumerate_splits(1)


def test_connectors_pickle_and_describe(tmp_path):
    objs = [FileSource.csv(str(tmp_path), schema="a int", sep=";"), FileSink.json(str(tmp_path)),
            CollectionSource(ipc(pa.table({"a": [1, 2]})), "a int"), SequenceSource(1, 5), PrintSink("p"), CollectSink("u")]
    for obj in objs:
        assert pickle.loads(pickle.dumps(obj)).describe() == obj.describe()
    ranges = SequenceSource(1, 10).enumerate_splits(3)
    assert [(p[0].start, p[0].end) for p in ranges] == [(1, 4), (4, 7), (7, 11)]
    assert PrintSink("p").line_prefix(0, 1) == "p> " and PrintSink().line_prefix(1, 2) == "2> "
    assert PrintSink().line_prefix(0, 1) == ""


def test_file_sink_prepare_rejects_existing_data(tmp_path):
    out = tmp_path / "out"
    FileSink.parquet(str(out)).prepare("job")  # missing dir is fine
    out.mkdir()
    FileSink.parquet(str(out)).prepare("job")  # empty dir is fine
    (out / "data.parquet").write_bytes(b"x")
    with pytest.raises(SinkException, match=str(out)):
        FileSink.parquet(str(out)).prepare("job")
    FileSink.parquet(str(out), mode="overwrite").prepare("job")


def test_a_commit_interrupted_by_a_leader_death_is_rolled_back_before_the_job_runs_again(
        tmp_path):
    """The old leader published subtask 0's file, then died before subtask 1's: the new leader
    runs the job again, and its prepare removes the half-published output instead of failing
    with "already holds data". A job whose commit completed is never touched."""
    out = tmp_path / "out"
    sink = FileSink.parquet(str(out))
    sink.prepare("job-a")
    staged = {i: out / "_temporary" / "job-a" / f"attempt-{i}" for i in (0, 1)}
    for i, directory in staged.items():
        directory.mkdir(parents=True)
        pq.write_table(pa.table({"id": [i]}), directory / "part-0.parquet")
    (out / "_temporary" / "job-a" / "_COMMITTING").write_bytes(b"")
    (staged[0] / "part-0.parquet").rename(out / "part-00000-000.parquet")  # then the death
    sink.prepare("job-a")  # the new leader's run of the same job
    assert sorted(p.name for p in out.iterdir()) == []
    sink.commit("job-a", [])  # nothing staged any more: nothing happens
    for i in (0, 1):  # the new run stages and publishes everything once
        staged[i].mkdir(parents=True)
        pq.write_table(pa.table({"id": [i]}), staged[i] / "part-0.parquet")
    sink.commit("job-a", [str(staged[0]), str(staged[1])])
    assert sorted(pq.read_table(str(out)).column("id").to_pylist()) == [0, 1]
    # published, but the leader died before the job's result was recorded: the marker is
    # still there, so the next leader's run rolls back and publishes once more
    assert (out / "_temporary" / "job-a" / "_COMMITTING").exists()
    sink.prepare("job-a")
    assert sorted(p.name for p in out.iterdir()) == []
    for i in (0, 1):
        staged[i].mkdir(parents=True)
        pq.write_table(pa.table({"id": [i]}), staged[i] / "part-0.parquet")
    sink.commit("job-a", [str(staged[0]), str(staged[1])])
    sink.release("job-a")  # the result is recorded
    assert not (out / "_temporary").exists()
    with pytest.raises(SinkException, match="already holds data"):
        sink.prepare("job-a")  # committed and recorded: its output is not removed
    assert sorted(pq.read_table(str(out)).column("id").to_pylist()) == [0, 1]


@pytest.mark.spark
def test_file_sink_two_phase_commit_and_abort(tmp_path, spark_provider):
    import cloudpickle
    from spark_task_helpers import Job, nodes

    from flintlock.runtime.ids import JobVertexID
    from flintlock.runtime.operators import specs as S

    out = tmp_path / "out"
    sink = FileSink.parquet(str(out))
    job = Job(str(tmp_path / "shuffle"), spark_provider)
    jid = str(job.job_id)
    sink.prepare(jid)
    chain = S.OperatorChain(nodes(S.SourceSpec(SequenceSource(0, 99)), S.SinkSpec(sink), outputs=()))
    splits = SequenceSource(0, 99).enumerate_splits(2)
    vertex = JobVertexID.generate()

    def attempt(subtask, number):
        tdd = job.tdd(chain, vertex=vertex, subtask=subtask, parallelism=2, attempt=number,
                      splits=tuple(splits[subtask]))
        return job.run(tdd)

    first0 = attempt(0, 0)
    retry0 = attempt(0, 1)  # a second attempt of subtask 0 (e.g. after a failure)
    r1 = attempt(1, 0)
    assert r1.metrics.records_out == 50 and retry0.metrics.records_out == 50
    committables = [retry0.committables[0], r1.committables[0]]
    assert committables[0] != first0.committables[0]
    visible = [p for p in out.iterdir() if not p.name.startswith(("_", "."))]
    assert visible == []  # nothing visible before commit
    pickle.loads(cloudpickle.dumps(sink)).commit(jid, committables)
    sink.commit(jid, committables)  # idempotent
    sink.release(jid)  # the Dispatcher recorded the result: the other attempts' files go too
    files = sorted(p.name for p in out.iterdir())
    assert all(f.startswith(("part-00000-", "part-00001-")) for f in files), files
    ids = sorted(i for f in files for i in pq.read_table(out / f).column("id").to_pylist())
    assert ids == list(range(100))  # the first attempt of subtask 0 is not duplicated

    # overwrite: a second job replaces the data; abort of a third job leaves it untouched
    sink2 = FileSink.parquet(str(out), mode="overwrite")
    job2 = Job(str(tmp_path / "shuffle"), spark_provider)
    chain2 = S.OperatorChain(nodes(S.SourceSpec(SequenceSource(7, 7)), S.SinkSpec(sink2), outputs=()))
    tdd = job2.tdd(chain2, vertex=vertex, subtask=0, parallelism=1,
                   splits=tuple(SequenceSource(7, 7).enumerate_splits(1)[0]))
    res = job2.run(tdd)
    sink2.commit(str(job2.job_id), [res.committables[0]])
    assert pq.read_table(str(out)).column("id").to_pylist() == [7]
    before = sorted(p.name for p in out.iterdir())
    job3 = Job(str(tmp_path / "shuffle"), spark_provider)
    tdd = job3.tdd(chain2, vertex=vertex, subtask=0, parallelism=1,
                   splits=tuple(SequenceSource(7, 7).enumerate_splits(1)[0]))
    res3 = job3.run(tdd)
    sink2.abort(str(job3.job_id), [res3.committables[0]])
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.spark
def test_file_source_reads_its_splits(tmp_path, spark_provider):
    from spark_task_helpers import Job, nodes, read_ipc

    from flintlock.runtime.operators import specs as S

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("word,n\nx,1\ny,2\n")
    (tmp_path / "in" / "b.csv").write_text("word,n\nz,3\n")
    src = FileSource.csv(str(tmp_path / "in"), schema="word string, n int")
    job = Job(str(tmp_path / "shuffle"), spark_provider)
    chain = S.OperatorChain(nodes(S.SourceSpec(src), S.SinkSpec(CollectSink("c")), outputs=()))
    results = job.run_vertex(chain, 3, splits=src.enumerate_splits(3))
    rows = sorted(r for res in results for data in res.accumulators.values()
                  for r in read_ipc(data).to_pylist() for r in [(r["word"], r["n"])])
    assert rows == [("x", 1), ("y", 2), ("z", 3)]
    assert sum(r.metrics.bytes_in for r in results) == sum(s.size for s in src.list_files())
