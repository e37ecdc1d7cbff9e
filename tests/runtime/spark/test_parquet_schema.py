"""The Spark schema of a Parquet file from its footer (``runtime.spark.parquet_schema``).

Unit tests on files pyarrow writes (which types convert, which are left to Spark's inference),
then, on the shared Spark session, that every converted schema equals the one Spark infers for
the same file, and that a Parquet source subtask reads the same rows with it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flintlock.runtime.spark.parquet_schema import SPARK_METADATA_KEY, spark_schema

#: columns whose Spark type no setting changes: (arrow type, values, Spark's type)
CONVERTED: dict[str, tuple[pa.DataType, list[Any], str]] = {
    "b": (pa.bool_(), [True, None], "boolean"),
    "i8": (pa.int8(), [1, None], "tinyint"),
    "i16": (pa.int16(), [1, None], "smallint"),
    "i32": (pa.int32(), [1, None], "int"),
    "i64": (pa.int64(), [1, None], "bigint"),
    "u8": (pa.uint8(), [1, None], "smallint"),
    "u16": (pa.uint16(), [1, None], "int"),
    "u32": (pa.uint32(), [1, None], "bigint"),
    "u64": (pa.uint64(), [1, None], "decimal(20,0)"),
    "f32": (pa.float32(), [1.5, None], "float"),
    "f64": (pa.float64(), [1.5, None], "double"),
    "s": (pa.string(), ["a", None], "string"),
    "d": (pa.date32(), [dt.date(2026, 11, 29), None], "date"),
    "ts_ms": (pa.timestamp("ms", tz="UTC"), [dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None],
              "timestamp"),
    "ts_us": (pa.timestamp("us", tz="UTC"), [dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None],
              "timestamp"),
    "dec9": (pa.decimal128(9, 2), [decimal.Decimal("1.25"), None], "decimal(9,2)"),
    "dec15": (pa.decimal128(15, 2), [decimal.Decimal("1.25"), None], "decimal(15,2)"),
    "dec38": (pa.decimal128(38, 10), [decimal.Decimal("1.25"), None], "decimal(38,10)"),
}

#: columns left to Spark's inference: (arrow type, values, the setting or reason)
LEFT_TO_SPARK: dict[str, tuple[pa.DataType, list[Any]]] = {
    "binary": (pa.binary(), [b"a", None]),                       # binaryAsString
    "ts_ntz": (pa.timestamp("us"), [dt.datetime(2026, 1, 1), None]),  # inferTimestampNTZ
    "ts_ns": (pa.timestamp("ns", tz="UTC"), [dt.datetime(2026, 1, 1, tzinfo=dt.UTC), None]),
    "time": (pa.time64("us"), [dt.time(1, 2), None]),
    "list": (pa.list_(pa.int32()), [[1, 2], None]),
    "struct": (pa.struct([("x", pa.int32())]), [{"x": 1}, None]),
    "map": (pa.map_(pa.string(), pa.int32()), [[("k", 1)], None]),
    "dec40": (pa.decimal256(40, 2), [decimal.Decimal("1.25"), None]),
}


def _write(path: Path, columns: dict[str, tuple[pa.DataType, list[Any]]], **kwargs: Any) -> Path:
    table = pa.table({name: pa.array(spec[1], spec[0]) for name, spec in columns.items()})
    pq.write_table(table, path, **kwargs)
    return path


def _converted_file(directory: Path) -> Path:
    return _write(directory / "converted.parquet",
                  {name: (spec[0], spec[1]) for name, spec in CONVERTED.items()})


def test_flat_columns_of_setting_independent_types_convert(tmp_path: Path) -> None:
    schema = spark_schema(pq.read_metadata(_converted_file(tmp_path)))
    assert schema is not None
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in schema.fields] == [
        (name, spec[2], True) for name, spec in CONVERTED.items()]


@pytest.mark.parametrize("name", sorted(LEFT_TO_SPARK))
def test_a_column_whose_reading_depends_on_spark_leaves_the_file_to_spark(tmp_path: Path,
                                                                          name: str) -> None:
    path = _write(tmp_path / f"{name}.parquet", {"id": (pa.int64(), [1, 2]),
                                                  name: LEFT_TO_SPARK[name]})
    assert spark_schema(pq.read_metadata(path)) is None


def test_int96_timestamps_are_left_to_spark(tmp_path: Path) -> None:
    path = _write(tmp_path / "int96.parquet",
                  {"ts": (pa.timestamp("ns"), [dt.datetime(2026, 1, 1), None])},
                  use_deprecated_int96_timestamps=True)
    assert pq.read_metadata(path).schema.column(0).physical_type == "INT96"
    assert spark_schema(pq.read_metadata(path)) is None


def test_spark_s_own_schema_in_the_footer_wins_and_a_damaged_one_is_ignored(
        tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([1], pa.int64())})
    own = ('{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,'
           '"metadata":{"comment":"from Spark"}}]}')
    pq.write_table(table.replace_schema_metadata({SPARK_METADATA_KEY: own}),
                   tmp_path / "spark.parquet")
    schema = spark_schema(pq.read_metadata(tmp_path / "spark.parquet"))
    assert schema is not None and schema.fields[0].metadata == {"comment": "from Spark"}
    pq.write_table(table.replace_schema_metadata({SPARK_METADATA_KEY: "{not json"}),
                   tmp_path / "damaged.parquet")
    schema = spark_schema(pq.read_metadata(tmp_path / "damaged.parquet"))
    assert schema is not None and schema.simpleString() == "struct<a:bigint>"


@pytest.mark.spark
def test_every_converted_schema_is_the_one_spark_infers(spark: Any, tmp_path: Path) -> None:
    files = [_converted_file(tmp_path)]
    spark.range(3).selectExpr("id", "cast(id as decimal(12,3)) AS d", "cast(id as string) AS s",
                              "current_timestamp() AS ts").write.parquet(str(tmp_path / "sp"))
    files += sorted((tmp_path / "sp").glob("*.parquet"))[:1]
    for path in files:
        inferred = spark.read.parquet(str(path)).schema
        ours = spark_schema(pq.read_metadata(path))
        assert ours is not None, path
        assert ours.simpleString() == inferred.simpleString(), path
        assert [f.nullable for f in ours.fields] == [f.nullable for f in inferred.fields], path


@pytest.mark.spark
def test_a_parquet_source_reads_the_same_rows_with_the_derived_schema(spark: Any,
                                                                     tmp_path: Path) -> None:
    from flintlock.connectors.file import FileSource, FileSplit
    from flintlock.runtime.spark.connector_io import read_source

    path = _converted_file(tmp_path)
    split = FileSplit(str(path), path.stat().st_size)
    read = read_source(spark, FileSource.parquet(str(tmp_path)), [split])
    assert read.records == 2
    assert read.df.schema == spark.read.parquet(str(path)).schema
    assert sorted(map(repr, read.df.collect())) == sorted(
        map(repr, spark.read.parquet(str(path)).collect()))
