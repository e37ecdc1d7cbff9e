"""PIPELINED segments as Arrow IPC files (``arrow_segments``) and the choice of format per epoch.

Routing must equal the Parquet segments' (same subpartition for the same key), types must
survive the round trip through Arrow (``timestamp_ntz`` included), a user column named ``sp``
needs no renaming, and one gate may read Parquet and Arrow segments together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flintlock.runtime.deployment import ResultPartitionDeploymentDescriptor
from flintlock.runtime.ids import (
    ExecutionAttemptID,
    ExecutionVertexID,
    IntermediateDataSetID,
    IntermediateResultPartitionID,
    JobVertexID,
)
from flintlock.runtime.jobgraph.types import ResultPartitionType, ShipStrategy
from flintlock.runtime.operators.specs import OutputSpec
from flintlock.runtime.shuffle.pipelined import (
    ARROW,
    PARQUET,
    PipelinedPartitionReader,
    PipelinedPartitionWriter,
)
from flintlock.runtime.spark.arrow_segments import (
    arrow_ddl,
    read_arrow_segments,
    split_by_route,
    write_arrow_segment,
)
from flintlock.runtime.spark.epoch_sources import GeneratorRange, estimated_bytes
from flintlock.runtime.spark.partitions import write_partition
from flintlock.runtime.spark.streaming_task import segment_format


def test_rows_are_grouped_by_route_keeping_their_order() -> None:
    table = pa.table({"v": [10, 11, 12, 13, 14, 15], "r": [2, 0, 2, 1, 0, 2]})
    parts = split_by_route(table, "r", 4)
    assert [p.column("v").to_pylist() for p in parts] == [[11, 14], [13], [10, 12, 15], []]
    assert all(p.column_names == ["v"] for p in parts)
    assert split_by_route(table.slice(0, 0), "r", 2)[1].num_rows == 0
    with pytest.raises(ValueError, match="outside 0..1"):
        split_by_route(table, "r", 2)


def test_ddl_keeps_spark_types_and_is_nullable() -> None:
    schema = pa.schema([pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
                        pa.field("ntz", pa.timestamp("us")),
                        pa.field("xs", pa.list_(pa.field("e", pa.int64(), nullable=False)))])
    assert arrow_ddl(schema) == "`ts` timestamp, `ntz` timestamp_ntz, `xs` array<bigint>"


def test_an_epoch_is_arrow_only_when_its_input_is_known_to_be_small() -> None:
    split = type("S", (), {"size": lambda self: None, "parallelism": 1})()
    small = estimated_bytes((GeneratorRange(split, 0, 1000),))
    assert small is not None and segment_format(small, 64 << 20) == ARROW
    assert segment_format(small, small) == PARQUET  # at the threshold
    assert segment_format(None, 64 << 20) == PARQUET  # a bounded source's splits: unknown
    assert estimated_bytes((object(),)) is None
    assert segment_format(0, 0) == PARQUET  # threshold 0: always Parquet


def _rpdd(n: int, strategy: ShipStrategy, keys: tuple[str, ...] = ()) -> ResultPartitionDeploymentDescriptor:
    ds = IntermediateDataSetID.generate()
    return ResultPartitionDeploymentDescriptor(
        partition_id=IntermediateResultPartitionID(ds, 0), ship_strategy=strategy,
        result_type=ResultPartitionType.PIPELINED, number_of_subpartitions=n, key_columns=keys,
        max_parallelism=128)


def _attempt() -> ExecutionAttemptID:
    return ExecutionAttemptID.generate(ExecutionVertexID(JobVertexID.generate(), 0), 0)


@pytest.mark.spark
def test_hash_routing_and_types_equal_the_parquet_segments(spark: Any, tmp_path: Path) -> None:
    df = spark.sql("""
        select id, concat('k', cast(id % 5 as string)) as key,
               timestamp_ntz'2024-01-01 10:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as t,
               case when id % 3 = 0 then null else array(id, id + 1) end as xs
        from range(40)""")
    rpdd = _rpdd(3, ShipStrategy.HASH, ("key",))
    output = OutputSpec(rpdd.partition_id.dataset_id, ShipStrategy.HASH, ("key",))
    arrow = write_arrow_segment(df, rpdd, output, str(tmp_path / "a"), _attempt())
    parquet = write_partition(df, rpdd, output, str(tmp_path / "p"), _attempt())
    assert arrow.rows_per_subpartition == parquet.rows_per_subpartition
    assert sum(arrow.rows_per_subpartition) == 40
    assert arrow.schema == "`id` bigint, `key` string, `t` timestamp_ntz, `xs` array<bigint>"
    for k in range(3):
        if not arrow.rows_per_subpartition[k]:
            continue
        got = read_arrow_segments(spark, [str(tmp_path / "a" / f"sp={k}.arrow")], arrow.schema)
        want = spark.read.schema(parquet.schema).parquet(str(tmp_path / "p" / f"sp={k}"))
        assert sorted(got.collect()) == sorted(want.collect())


@pytest.mark.spark
def test_a_user_column_named_sp_is_kept(spark: Any, tmp_path: Path) -> None:
    rpdd = _rpdd(2, ShipStrategy.REBALANCE)
    output = OutputSpec(rpdd.partition_id.dataset_id, ShipStrategy.REBALANCE)
    loc = write_arrow_segment(spark.sql("select id, id * 10 as sp from range(6)"), rpdd, output,
                              str(tmp_path), _attempt())
    assert sum(loc.rows_per_subpartition) == 6 and min(loc.rows_per_subpartition) > 0
    assert loc.schema == "`id` bigint, `sp` bigint"
    got = read_arrow_segments(spark, [str(tmp_path / f"sp={k}.arrow") for k in (0, 1)], loc.schema)
    assert sorted((r.id, r.sp) for r in got.collect()) == [(i, i * 10) for i in range(6)]


@pytest.mark.spark
def test_a_gate_reads_parquet_and_arrow_segments_of_one_partition(spark: Any, tmp_path: Path) -> None:
    rpdd = _rpdd(1, ShipStrategy.FORWARD)
    output = OutputSpec(rpdd.partition_id.dataset_id, ShipStrategy.FORWARD)
    uri = str(tmp_path / "part")
    writer = PipelinedPartitionWriter(uri, 1, 1, 4)
    first = write_partition(spark.range(0, 3), rpdd, output, writer.segment_uri(), _attempt())
    writer.commit(first.rows_per_subpartition, first.bytes_per_subpartition, schema=first.schema)
    second = write_arrow_segment(spark.range(3, 5), rpdd, output, writer.segment_uri(), _attempt())
    writer.commit(second.rows_per_subpartition, second.bytes_per_subpartition,
                  schema=second.schema, format=ARROW, end=True)
    reader = PipelinedPartitionReader([uri], 0, 0, 0)
    segments = reader.poll(10)
    assert [s.format for s in segments] == [PARQUET, ARROW]
    assert segments[1].dirs[0].endswith("seg-00000001/sp=0.arrow")
    got = read_arrow_segments(spark, segments[1].dirs, reader.schema).union(
        spark.read.schema(reader.schema).parquet(*segments[0].dirs))
    assert sorted(r.id for r in got.collect()) == [0, 1, 2, 3, 4]
