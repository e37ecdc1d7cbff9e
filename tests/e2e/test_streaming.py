"""STREAMING jobs on the local cluster (real JobManager components, two TaskExecutors, Spark).

Each job's vertices are deployed together and exchange data through PIPELINED partitions while it
runs; the tests check the results against the same computation done directly, that output was
produced epoch by epoch, that a slow consumer throttles its producer through the segment credits
(no unbounded backlog), that a monitored directory's new files are processed while the job runs,
and that cancelling an unbounded job ends it within seconds with no Spark job left running.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.connectors import (
    DataGeneratorSource,
    FileSink,
    FileSource,
    RateLimiterStrategy,
)
from flintlock.runtime.jobgraph.types import JobStatus
from flintlock.testing.waiting import wait_until_sync

pytestmark = [pytest.mark.spark]


def _env(parallelism: int = 2, **settings: Any) -> StreamExecutionEnvironment:
    conf = Configuration({"local.number-taskmanager": 2, "taskmanager.numberOfTaskSlots": 2,
                          **settings})
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.set_restart_strategy(RestartStrategies.no_restart())
    return env


def _record(i: int) -> tuple[int, str]:
    return (i, f"w{i % 7}")


def _status(client: Any) -> JobStatus:
    status = client.get_job_status()
    return status.result() if hasattr(status, "result") else status


@pytest.mark.parametrize("segments", ["arrow", "parquet"])
def test_a_bounded_generator_streams_through_a_rebalance_into_a_file_sink(
        tmp_path: Path, segments: str) -> None:
    out = tmp_path / "out"
    # the epochs are small, so their segments are Arrow files unless the threshold is 0
    threshold = "64mb" if segments == "arrow" else "0"
    env = _env(**{"taskmanager.network.pipelined.arrow-segment-threshold": threshold})
    source = DataGeneratorSource(_record, 3000, RateLimiterStrategy.per_second(1500),
                                 "id long, word string")
    env.from_source(source).map(lambda r: (r.id * 2, r.word.upper()), "id2 long, word string") \
        .rebalance().filter("id2 % 3 = 0").sink_to(FileSink.parquet(str(out)))
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.execute("generated")
    table = pq.read_table(out)
    assert sorted(table.column("id2").to_pylist()) == [i * 2 for i in range(3000) if i * 2 % 3 == 0]
    assert set(table.column("word").to_pylist()) == {f"W{i}" for i in range(7)}
    parts = sorted(p.name for p in out.glob("part-*"))
    # two sink subtasks, each appending one part file per epoch: the data arrived over time
    assert len(parts) > 4, parts


@pytest.mark.parametrize("sink", ["parquet", "csv"])
def test_a_parquet_file_sink_after_a_key_by_publishes_the_segment_files_without_a_spark_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sink: str) -> None:
    """A sink subtask whose chain is "read the gate -> FileSink.parquet" copies the producer's
    Parquet segment files as its part files (``segment_sink``); a CSV sink writes with Spark.
    Either way every row arrives once, in the subtask its key hashes to."""
    from flintlock.runtime.spark import streaming_task

    copied: list[int] = []
    spark_writes: list[str] = []
    copy, write = streaming_task.copy_segment_files, streaming_task.write_sink

    def counting_copy(dirs: Any, target: str) -> tuple[int, int]:
        files, size = copy(dirs, target)
        copied.append(files)
        return files, size

    def counting_write(df: Any, sink_object: Any, **kwargs: Any) -> Any:
        spark_writes.append(type(sink_object).__name__)
        return write(df, sink_object, **kwargs)

    monkeypatch.setattr(streaming_task, "copy_segment_files", counting_copy)
    monkeypatch.setattr(streaming_task, "write_sink", counting_write)
    out = tmp_path / "out"
    env = _env(**{"taskmanager.network.pipelined.arrow-segment-threshold": "0"})
    source = DataGeneratorSource(_record, 3000, RateLimiterStrategy.per_second(1500),
                                 "id long, word string")
    file_sink = FileSink.parquet(str(out)) if sink == "parquet" else FileSink.csv(str(out))
    from pyspark.sql import functions as F

    env.from_source(source).with_column("word", F.upper(F.col("word"))).key_by("word") \
        .sink_to(file_sink)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.execute("keyed into files")
    if sink == "parquet":
        table = pq.read_table(out)
        assert copied and sum(copied) > 2 and not spark_writes, (copied, spark_writes)
    else:
        import pyarrow.csv as pcsv

        table = pa.concat_tables(pcsv.read_csv(p) for p in sorted(out.glob("part-*")))
        assert spark_writes and not copied, (copied, spark_writes)
    assert sorted(table.column("id").to_pylist()) == list(range(3000))
    assert set(table.column("word").to_pylist()) == {f"W{i}" for i in range(7)}
    # one sink subtask per word: no word is in the part files of both subtasks
    by_subtask: dict[str, set[str]] = {}
    for part in out.glob("part-*"):
        subtask = part.name.split("-")[1]
        read = pq.read_table(part) if sink == "parquet" else pcsv.read_csv(part)
        by_subtask.setdefault(subtask, set()).update(read.column("word").to_pylist())
    assert len(by_subtask) == 2 and not set.intersection(*by_subtask.values()), by_subtask


def _with_sp(i: int) -> tuple[int, int]:
    return (i, i % 3)


@pytest.mark.parametrize("segments", ["arrow", "parquet"])
def test_a_user_column_named_sp_streams_through_an_exchange(tmp_path: Path, segments: str) -> None:
    """Segments are laid out by a subpartition column ``sp``: a user column of that name is
    stored under another name in Parquet segments and read back under its own."""
    out = tmp_path / "out"
    threshold = "64mb" if segments == "arrow" else "0"
    env = _env(**{"taskmanager.network.pipelined.arrow-segment-threshold": threshold})
    source = DataGeneratorSource(_with_sp, 2000, RateLimiterStrategy.per_second(1000),
                                 "id long, sp long")
    env.from_source(source).rebalance().filter("id >= 0").key_by("sp") \
        .sink_to(FileSink.parquet(str(out)))
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.execute("a column named sp")
    rows = pq.read_table(out).to_pylist()
    assert sorted((r["id"], r["sp"]) for r in rows) == [_with_sp(i) for i in range(2000)]


def test_a_bounded_generator_runs_in_batch_mode_too() -> None:
    env = _env()  # AUTOMATIC with a bounded source: BATCH
    source = DataGeneratorSource(_record, 500, None, "id long, word string")
    rows = list(env.from_source(source).filter("id % 5 = 0").execute_and_collect())
    assert sorted(r.id for r in rows) == list(range(0, 500, 5))


def test_a_union_of_a_collection_and_a_generator_is_collected_once_each() -> None:
    env = _env().set_runtime_mode(RuntimeExecutionMode.STREAMING)
    generated = env.from_source(DataGeneratorSource(_record, 400, RateLimiterStrategy.per_second(800),
                                                    "id long, word string"))
    fixed = env.from_collection([(10_000 + i, "fixed") for i in range(5)], "id long, word string")
    rows = list(generated.union(fixed).execute_and_collect())
    assert sorted(r.id for r in rows) == list(range(400)) + [10_000 + i for i in range(5)]


def _slow_copy(batch: Any) -> Any:
    time.sleep(0.5)  # per Arrow batch: the consumer needs over 0.5 s per segment
    return batch


def _pipelined_backlogs(root: Path) -> dict[str, tuple[int, int]]:
    """Per PIPELINED partition under ``root``: (committed segments, least acknowledged)."""
    out = {}
    for commits in root.glob("*/pipelined/*/*/_commits"):
        committed = len(list(commits.glob("*.json")))
        acks = [int(json.loads(p.read_text())["consumed"])
                for p in commits.parent.glob("_acks/*.json")]
        out[str(commits.parent)] = (committed, min(acks) if acks else 0)
    return out


def test_a_slow_consumer_throttles_an_unbounded_source_and_cancel_ends_the_job(tmp_path: Path) -> None:
    shuffle = tmp_path / "shuffle"
    env = _env(1, **{"shuffle.storage-dir": str(shuffle),
                     "taskmanager.network.memory.buffers-per-channel": 2,
                     "taskmanager.network.memory.floating-buffers-per-gate": 0,
                     "execution.buffer-timeout": "10 ms"})
    # unbounded; an epoch every 10 ms at most (a Spark job each: a few hundred ms in practice)
    source = DataGeneratorSource(_record, None, RateLimiterStrategy.per_second(5000),
                                 "id long, word string")
    env.from_source(source).rebalance().map_batches(_slow_copy, "id long, word string") \
        .sink_to(FileSink.parquet(str(tmp_path / "out")))
    client = env.execute_async("throttled")
    seen: list[dict[str, tuple[int, int]]] = []

    def throttled_while_the_consumer_progresses() -> bool:
        backlogs = _pipelined_backlogs(shuffle)
        seen.append(backlogs)
        assert all(c - a <= 2 for c, a in backlogs.values()), backlogs  # never beyond the credit
        full = any(b and max(c - a for c, a in b.values()) == 2 for b in seen)
        return full and bool(backlogs) and min(a for _, a in backlogs.values()) >= 3

    try:
        wait_until_sync(throttled_while_the_consumer_progresses, 180, 0.05, lambda: seen[-3:])
    finally:
        started = time.monotonic()
        client.cancel()
        wait_until_sync(lambda: _status(client) is JobStatus.CANCELED, 30, 0.05,
                        lambda: _status(client))
    assert time.monotonic() - started < 15
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("part-*"))
    wait_until_sync(lambda: not list(shuffle.glob("*/pipelined")), 10, 0.05,
                    lambda: list(shuffle.glob("*/pipelined/*")))  # released with the job


def test_files_dropped_into_a_monitored_directory_are_processed_while_the_job_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "before.txt").write_text("alpha\nbeta\n")
    env = _env()
    source = FileSource.text(str(incoming)).monitor_continuously(200)
    env.from_source(source).map(lambda r: (r.value.upper(),), "word string") \
        .rebalance().print()
    client = env.execute_async("monitored")
    printed: list[str] = []

    def lines_seen(expected: set[str]) -> bool:
        printed.extend(capsys.readouterr().out.splitlines())
        return expected <= {line.split("> ", 1)[-1] for line in printed}

    try:
        wait_until_sync(lambda: lines_seen({"Row(word='ALPHA')", "Row(word='BETA')"}), 120, 0.05,
                        lambda: printed[-10:])
        for i in range(3):  # written hidden, then renamed: each file appears complete
            (incoming / f".f{i}.txt").write_text(f"gamma{i}\ndelta{i}\n")
            (incoming / f".f{i}.txt").rename(incoming / f"f{i}.txt")
        expected = {f"Row(word='{w.upper()}{i}')" for i in range(3) for w in ("gamma", "delta")}
        wait_until_sync(lambda: lines_seen(expected), 60, 0.05, lambda: printed[-10:])
        assert _status(client) is JobStatus.RUNNING  # an unbounded source: still running
    finally:
        client.cancel()
        wait_until_sync(lambda: _status(client) is JobStatus.CANCELED, 30, 0.05,
                        lambda: _status(client))
    words = [line.split("> ", 1)[-1] for line in printed if "Row(" in line]
    assert len(words) == len(set(words)) == 8  # every line once


def _fails_at_42(i: int) -> tuple[int]:
    if i == 42:
        raise ValueError("no record 42")
    return (i,)


def test_a_generator_that_raises_fails_the_job_naming_the_function() -> None:
    env = _env().set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.from_source(DataGeneratorSource(_fails_at_42, 100, None, "id long")) \
        .sink_to(FileSink.parquet("/nonexistent-never-written"))
    with pytest.raises(Exception) as info:
        env.execute("raises")
    assert "_fails_at_42" in str(info.value) and "no record 42" in str(info.value)
