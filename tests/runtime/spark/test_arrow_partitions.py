"""BLOCKING result partitions (issue 10): Arrow IPC files for small batch subtasks (which
subtasks write them, that they route rows exactly as Spark-written Parquet does, that gates read
Arrow, Parquet and both at once) and producers writing only the columns their consumers read."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from spark_task_helpers import Job, fn, gate, nodes, output, read_ipc

from flintlock.connectors import CollectSink, FileSource
from flintlock.connectors.file import FileSplit
from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.epoch_sources import FILE_EXPANSION
from flintlock.runtime.spark.partitions import consumed_only
from flintlock.runtime.spark.stream_task import arrow_partitions, estimated_input_bytes

THRESHOLD = "taskmanager.network.blocking.arrow-partition-threshold"


@pytest.fixture
def job(tmp_path, spark_provider):
    return Job(str(tmp_path / "shuffle"), spark_provider)


def _files(tmp_path: Path, rows: int, name: str = "t") -> FileSource:
    d = tmp_path / name
    d.mkdir()
    pq.write_table(pa.table({"k": list(range(rows)), "v": [f"v{i}" for i in range(rows)]}),
                   d / "part-0.parquet")
    return FileSource.parquet(str(d))


def _produce(job: Job, source: FileSource, *specs, n_sub: int = 4):
    chain = S.OperatorChain(nodes(S.SourceSpec(source), *specs),
                            outputs=(output(ShipStrategy.HASH, ("k",)),))
    return job.run_vertex(chain, 1, splits=source.enumerate_splits(1), subpartitions=(n_sub,))


def _consume(job: Job, gates):
    chain = S.OperatorChain(nodes(S.UnionSpec(), S.SinkSpec(CollectSink("c")), gates=(0,),
                                  outputs=()))
    results = job.run_vertex(chain, len(gates), gates=gates)
    return [read_ipc(r.accumulators[f"collect-c/{i}"]).to_pylist() for i, r in enumerate(results)]


@pytest.mark.spark
def test_a_small_subtask_writes_arrow_files_routed_as_parquet_would_be(job, tmp_path):
    source = _files(tmp_path, 1000)
    job.configuration[THRESHOLD] = "0"
    parquet = _produce(job, source)[0].partitions[0]
    job.configuration[THRESHOLD] = "1mb"
    arrow = _produce(job, source)[0].partitions[0]
    assert (parquet.format, arrow.format) == ("parquet", "arrow")
    assert arrow.rows_per_subpartition == parquet.rows_per_subpartition
    assert sum(arrow.rows_per_subpartition) == 1000
    written = sorted(p.name for p in Path(arrow.uri).iterdir())
    assert written == [f"sp={k}.arrow" for k, n in enumerate(arrow.rows_per_subpartition) if n]
    # each consumer reads its range; together every row exactly once, keys where Parquet put them
    for loc in (parquet, arrow):
        results = [SimpleNamespace(partitions=(loc,))]
        got = _consume(job, [(gate(results, 0, 0, 1),), (gate(results, 0, 2, 3),)])
        assert sorted(r["k"] for rows in got for r in rows) == list(range(1000))
        if loc is parquet:
            first_range = {r["k"] for r in got[0]}
        else:
            assert {r["k"] for r in got[0]} == first_range


@pytest.mark.spark
def test_a_gate_reads_arrow_and_parquet_producers_together(job, tmp_path):
    job.configuration[THRESHOLD] = "0"
    parquet = _produce(job, _files(tmp_path, 300, "a"), n_sub=2)
    job.configuration[THRESHOLD] = "1mb"
    arrow = _produce(job, _files(tmp_path, 200, "b"), S.SelectSpec((
        (F.col("k") + 1000).alias("k"), "v")), n_sub=2)
    assert [r.partitions[0].format for r in (*parquet, *arrow)] == ["parquet", "arrow"]
    got = _consume(job, [(gate([*parquet, *arrow], 0, 0, 1),)])
    assert sorted(r["k"] for r in got[0]) == [*range(300), *range(1000, 1200)]


@pytest.mark.spark
def test_an_empty_arrow_partition_exists_and_reads_as_empty(job, tmp_path):
    (res,) = _produce(job, _files(tmp_path, 50), S.FilterSpec(F.col("k") < 0))
    loc = res.partitions[0]
    assert loc.format == "arrow" and sum(loc.rows_per_subpartition) == 0
    assert Path(loc.uri).is_dir() and list(Path(loc.uri).iterdir()) == []
    got = _consume(job, [(gate([res], 0, 0, 3),)])
    assert got == [[]]


@pytest.mark.spark
def test_a_chain_that_can_multiply_rows_writes_parquet(job, tmp_path):
    flat = S.FlatMapSpec(fn(lambda row: [row, row]), "k bigint, v string")
    (res,) = _produce(job, _files(tmp_path, 10), flat)
    assert res.partitions[0].format == "parquet"
    assert sum(res.partitions[0].rows_per_subpartition) == 20


# ---- the decision (no Spark) ---------------------------------------------------------------------


def _loc(nbytes: int, fmt: str) -> PartitionLocation:
    return PartitionLocation(partition_id=None, producer_attempt=None, uri="/x",  # type: ignore[arg-type]
                             rows_per_subpartition=(1, 1), bytes_per_subpartition=(nbytes, 7),
                             schema="", format=fmt)


def _tdd(splits=(), locations=(), strategy=ShipStrategy.HASH):
    gates = [SimpleNamespace(subpartition_start=0, subpartition_end=0, ship_strategy=strategy,
                             partitions=tuple(locations))] if locations else []
    return SimpleNamespace(source_splits=tuple(splits), input_gates=gates)


def test_input_estimate_expands_stored_parquet_and_file_bytes_but_not_arrow():
    assert estimated_input_bytes(_tdd([FileSplit("/a", 100)])) == 100 * FILE_EXPANSION
    assert estimated_input_bytes(_tdd(locations=[_loc(10, "parquet"), _loc(10, "arrow")])) == \
        10 * FILE_EXPANSION + 10
    assert estimated_input_bytes(_tdd(["an unknown split"])) is None


def test_arrow_only_below_the_threshold_and_never_for_row_multiplying_chains():
    chain = S.OperatorChain(nodes(S.UnionSpec(), gates=(0,)), outputs=())
    small = _tdd(locations=[_loc(1000, "arrow")])
    assert arrow_partitions(chain, small, 1001)
    assert not arrow_partitions(chain, small, 1000)
    assert not arrow_partitions(chain, small, 0)
    assert not arrow_partitions(chain, _tdd(["an unknown split"]), 1 << 30)
    cross = S.OperatorChain(nodes(S.JoinSpec("cross", (), ()), gates=(0, 1)), outputs=())
    assert not arrow_partitions(cross, small, 1 << 30)


# ---- column pruning before the write (OutputSpec.columns) -----------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("threshold", ["0", "1mb"])
def test_a_producer_writes_only_the_columns_its_consumer_reads(job, tmp_path, threshold):
    job.configuration[THRESHOLD] = threshold
    source = _files(tmp_path, 100)
    out = dataclasses.replace(output(ShipStrategy.HASH, ("k",)), columns=("k",))
    chain = S.OperatorChain(nodes(S.SourceSpec(source)), outputs=(out,))
    (res,) = job.run_vertex(chain, 1, splits=source.enumerate_splits(1), subpartitions=(2,))
    assert res.partitions[0].schema.startswith("`k` bigint") and "`v`" not in res.partitions[0].schema
    got = _consume(job, [(gate([res], 0, 0, 1),)])
    assert sorted(r["k"] for r in got[0]) == list(range(100)) and set(got[0][0]) == {"k"}


@pytest.mark.spark
def test_consumed_only_keeps_what_is_read_in_the_frames_order(spark_provider):
    spark = spark_provider.get()
    df = spark.createDataFrame([(1, "a", 2.0, 3)],
                               "K bigint, `a b` string, c double, `x.(y)|z` int")
    assert consumed_only(df, None) is df
    assert consumed_only(df, ("c", "other", "k", "a b")).columns == ["K", "a b", "c"]
    assert consumed_only(df, ("a b", "zz")).columns == ["a b"]
    assert consumed_only(df, ("k",)).columns == ["K"]            # Spark resolves without case
    assert consumed_only(df, ("x.(y)|z",)).columns == ["x.(y)|z"]  # regex characters literally
    assert consumed_only(df, ("x",)).columns == []               # whole names only
    assert consumed_only(df, ()).columns == ["K"]                 # rows still count
    assert consumed_only(df, ("c", "k")).collect()[0].asDict() == {"K": 1, "c": 2.0}
    dup = df.crossJoin(spark.createDataFrame([(3,)], "k bigint"))
    assert consumed_only(dup, ("c",)).columns == ["c"]
    assert consumed_only(dup, ("k", "c")).columns == ["K", "c", "k"]
