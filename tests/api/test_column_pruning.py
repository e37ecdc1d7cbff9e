"""Column pruning across exchanges: the columns each non-chained output carries to its consumer
(``OutputSpec.columns``; no Spark, no cluster)."""

from __future__ import annotations

import cloudpickle
import pytest
from flintlock_api_fakes import FakeSink, FakeSource, install_connector_standins
from pyspark.sql import functions as F

from flintlock import StreamExecutionEnvironment
from flintlock.graph.column_pruning import input_columns
from flintlock.runtime.operators import specs as S


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINTLOCK_CONF_DIR", raising=False)
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)
    install_connector_standins(monkeypatch)


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    return env.configure({"table.optimizer.join.broadcast-threshold": "-1"})


def _outputs(env: StreamExecutionEnvironment) -> dict[str, list[tuple[str, ...] | None]]:
    return {v.name: [o.columns for o in cloudpickle.loads(v.invokable_payload).outputs]
            for v in env.get_job_graph().vertices}


def test_each_join_side_carries_what_the_join_and_everything_after_it_read() -> None:
    env = _env()
    orders = env.from_source(FakeSource("Fake: /orders"), "orders")
    lines = env.from_source(FakeSource("Fake: /lines"), "lines")
    (lines.join(orders.filter(F.col("O_DATE") > 3), left_on=["l_ok"], right_on=["o_ok"])
        .with_column("rev", F.col("price") * (1 - F.col("disc")))
        .key_by("o_prio").agg(F.sum("rev").alias("rev")).sink_to(FakeSink()))
    outs = _outputs(env)
    wanted = ("disc", "l_ok", "o_ok", "o_prio", "price")  # lower-case; the filter is chained
    assert outs["Source: lines"] == [wanted]
    assert outs["Source: orders -> Filter"] == [wanted]


def test_the_right_side_of_a_semi_join_carries_only_its_keys() -> None:
    env = _env()
    a = env.from_source(FakeSource("Fake: /a"), "a")
    b = env.from_source(FakeSource("Fake: /b"), "b")
    a.join(b, left_on=["k"], right_on=["bk"], how="anti").select("v").sink_to(FakeSink())
    outs = _outputs(env)
    assert outs["Source: a"] == [("k", "v")]
    assert outs["Source: b"] == [("bk",)]


@pytest.mark.parametrize("consumer", [
    lambda s: s.map(lambda r: r, "k bigint"),              # a Python function sees whole rows
    lambda s: s.distinct(),                                 # distinct depends on every column
    lambda s: s.select("k + 1 AS k"),                       # SQL text is not looked into
    lambda s: s,                                            # a sink writes every column
])
def test_consumers_that_may_read_any_column_get_every_column(consumer) -> None:  # type: ignore[no-untyped-def]
    env = _env()
    src = env.from_source(FakeSource(), "s").rebalance()
    consumer(src).sink_to(FakeSink())
    assert _outputs(env)["Source: s"] == [None]


def test_hash_keys_always_travel() -> None:
    env = _env().configure({"table.optimizer.agg-phase-strategy": "ONE_PHASE"})
    env.from_source(FakeSource(), "s").key_by("K").agg(F.count(F.lit(1)).alias("n")) \
        .sink_to(FakeSink())
    assert _outputs(env)["Source: s"] == [("k",)]


@pytest.mark.parametrize(("spec", "index", "needed", "expected"), [
    (S.FilterSpec(F.col("a") > 1), 0, frozenset({"b"}), {"a", "b"}),
    (S.FilterSpec(F.col("a") > 1), 0, None, None),
    (S.WithColumnSpec("c", F.col("a") + 1), 0, frozenset({"c", "d"}), {"a", "d"}),
    (S.SelectSpec((F.col("a").alias("x"), "B")), 0, frozenset({"x"}), {"a", "b"}),
    (S.SortSpec((F.col("s").desc(),)), 0, frozenset({"v"}), {"s", "v"}),
    (S.GlobalAggregateSpec((F.max("m").alias("mx"),)), 0, None, {"m"}),
    (S.JoinSpec("inner", ("k",), ("j",)), 1, frozenset({"v"}), {"k", "j", "v"}),
    (S.JoinSpec("semi", ("k",), ("j",)), 1, None, {"j"}),
    (S.DistinctSpec(), 0, frozenset({"a"}), None),
])
def test_input_columns(spec: object, index: int, needed: frozenset[str] | None,
                       expected: set[str] | None) -> None:
    got = input_columns(spec, index, needed)
    assert (None if got is None else set(got)) == expected
