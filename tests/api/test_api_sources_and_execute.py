"""Collections, schemas, execute() and execute_and_collect() against a stand-in executor."""

from __future__ import annotations

import os
import sys
import types

import pyarrow as pa
import pytest
from flintlock_api_fakes import FakeExecutor, FakeSink, FakeSource, install_connector_standins
from pyspark.sql import Row
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

import flintlock
from flintlock import StreamExecutionEnvironment
from flintlock.api.schema import (
    arrow_schema_from_ddl,
    ddl_from_arrow_schema,
    ipc_to_table,
    rows_to_ipc,
    table_to_rows,
    to_ddl,
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINTLOCK_CONF_DIR", raising=False)
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)
    install_connector_standins(monkeypatch)


@pytest.fixture
def executor(monkeypatch: pytest.MonkeyPatch) -> FakeExecutor:
    fake = FakeExecutor()
    module = types.ModuleType("flintlock.client.executor")
    module.execute_job = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flintlock.client.executor", module)
    return fake


def test_importing_flintlock_enables_spark_connect_mode() -> None:
    assert os.environ["SPARK_CONNECT_MODE_ENABLED"] == "1"
    assert flintlock.StreamExecutionEnvironment is StreamExecutionEnvironment
    assert {"DataStream", "KeyedStream", "Configuration"} <= set(flintlock.__all__)
    with pytest.raises(AttributeError):
        flintlock.NoSuchThing  # noqa: B018


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("a int, b string", pa.schema([("a", pa.int32()), ("b", pa.string())])),
        ("a: bigint, `b c` double", pa.schema([("a", pa.int64()), ("b c", pa.float64())])),
        ("d decimal(15, 2), t timestamp, day date",
         pa.schema([("d", pa.decimal128(15, 2)), ("t", pa.timestamp("us", tz="UTC")),
                    ("day", pa.date32())])),
        ("xs array<struct<k:string,v:int>>, m map<string,bigint>",
         pa.schema([("xs", pa.list_(pa.struct([("k", pa.string()), ("v", pa.int32())]))),
                    ("m", pa.map_(pa.string(), pa.int64()))])),
        ("struct<a:int>", pa.schema([("a", pa.int32())])),
        ("a INT NOT NULL, b VARCHAR(10)",
         pa.schema([pa.field("a", pa.int32(), nullable=False), ("b", pa.string())])),
    ],
)
def test_ddl_to_arrow(ddl: str, expected: pa.Schema) -> None:
    assert arrow_schema_from_ddl(ddl) == expected


@pytest.mark.parametrize("bad", ["a", "a int,", "a blob", "a array<int", "a decimal(x)"])
def test_bad_ddl_is_rejected_with_the_schema_in_the_message(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid schema"):
        arrow_schema_from_ddl(bad)


def test_arrow_to_ddl_round_trips() -> None:
    ddl = "`a` bigint, `b` array<struct<x:int>>, `c` decimal(10,2), `d` timestamp_ntz"
    assert ddl_from_arrow_schema(arrow_schema_from_ddl(ddl)) == ddl


def test_struct_type_becomes_ddl() -> None:
    st = StructType([StructField("id", LongType()), StructField("tags", ArrayType(StringType())),
                     StructField("name", StringType(), nullable=False)])
    ddl = to_ddl(st)
    assert ddl == "`id` bigint, `tags` array<string>, `name` string NOT NULL"
    assert arrow_schema_from_ddl(ddl).field("name").nullable is False


def test_rows_of_every_shape_become_one_ipc_stream() -> None:
    rows = [(1, "a"), {"n": 2, "s": "b"}, Row(n=3, s="c")]
    payload, ddl = rows_to_ipc(rows, "n bigint, s string")
    table = ipc_to_table([payload])
    assert ddl == "n bigint, s string"
    assert table.to_pydict() == {"n": [1, 2, 3], "s": ["a", "b", "c"]}


def test_rows_with_the_wrong_arity_are_rejected() -> None:
    with pytest.raises(ValueError, match="2 values"):
        rows_to_ipc([(1, 2)], "a int")


def test_schema_is_inferred_from_dicts() -> None:
    _, ddl = rows_to_ipc([{"a": 1, "b": "x"}], None)
    assert ddl == "`a` bigint, `b` string"


def test_table_to_rows_nests_structs() -> None:
    t = pa.table({"a": [1], "s": [{"x": 2}]})
    assert table_to_rows(t) == [Row(a=1, s=Row(x=2))]
    assert table_to_rows(None) == []


def test_from_collection_ships_arrow_ipc_to_the_collection_source() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    ds = env.from_collection([(1, "a"), (2, "b")], "n bigint, s string")
    ds.sink_to(FakeSink())
    source = env.get_job_graph().vertices[0].source
    assert source.schema_ddl == "n bigint, s string"
    assert ipc_to_table([source.arrow_ipc]).to_pydict() == {"n": [1, 2], "s": ["a", "b"]}


def test_from_sequence_is_inclusive() -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.from_sequence(1, 10).print()
    source = env.get_job_graph().vertices[0].source
    assert (source.start, source.end_inclusive) == (1, 10)
    with pytest.raises(ValueError):
        env.from_sequence(5, 1)


def test_execute_submits_the_job_graph_and_consumes_the_sinks(executor: FakeExecutor) -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(3)
    env.from_source(FakeSource()).sink_to(FakeSink())
    env.execute("first")
    (jg,) = executor.submitted
    assert jg.name == "first" and jg.vertices[0].parallelism == 3
    assert executor.configurations[0].to_dict()["parallelism.default"] == "3"
    with pytest.raises(Exception, match="No operators defined"):
        env.execute("again")


def test_execute_and_collect_concatenates_subtasks_in_order(executor: FakeExecutor) -> None:
    executor.per_subtask = {1: pa.table({"id": [3, 4]}), 0: pa.table({"id": [1, 2]})}
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    rows = env.from_source(FakeSource()).execute_and_collect()
    assert rows == [Row(id=1), Row(id=2), Row(id=3), Row(id=4)]
    (jg,) = executor.submitted
    assert jg.name == "DataStream Collect"
    assert jg.vertices[0].name == "Source: Fake: /data -> Sink: Collect"


def test_execute_and_collect_with_a_limit(executor: FakeExecutor) -> None:
    executor.per_subtask = {0: pa.table({"id": [1, 2, 3]})}
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    rows = env.from_source(FakeSource()).execute_and_collect(2)
    assert rows == [Row(id=1), Row(id=2)]
    names = [v.name for v in executor.submitted[0].vertices]
    assert names == ["Source: Fake: /data -> Limit", "Limit -> Sink: Collect"]


def test_a_failed_compile_does_not_leave_the_collect_sink_behind(executor: FakeExecutor) -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    lock = __import__("threading").Lock()
    with pytest.raises(Exception, match="Cannot serialize"):
        env.from_source(FakeSource()).map(lambda r: lock, "a int").execute_and_collect()
    executor.per_subtask = {0: pa.table({"id": [1]})}
    assert env.from_source(FakeSource()).execute_and_collect() == [Row(id=1)]
    assert len(executor.submitted) == 1
