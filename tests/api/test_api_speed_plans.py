"""Plans the planner speeds up: two-phase aggregation and broadcast joins (no Spark, no cluster)."""

from __future__ import annotations

from pathlib import Path

import cloudpickle
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from flintlock_api_fakes import FakeSink, FakeSource, install_connector_standins
from pyspark.sql import functions as F

from flintlock import StreamExecutionEnvironment
from flintlock.api.exceptions import InvalidProgramException
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.connectors import FileSource
from flintlock.graph.stream_graph_generator import operator_id_from_uid
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators.specs import (
    JoinSpec,
    KeyedAggregateSpec,
    LocalAggregateSpec,
    MergeAggregateSpec,
)

HASH, BROADCAST = ShipStrategy.HASH, ShipStrategy.BROADCAST


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINTLOCK_CONF_DIR", raising=False)
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)
    install_connector_standins(monkeypatch)


def _configured(p: int = 2, conf: dict[str, str] | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(p)
    return env.configure(conf or {})


def _chain(v):
    return cloudpickle.loads(v.invokable_payload)


def _parquet_dir(root: Path, name: str, rows: int) -> str:
    d = root / name
    d.mkdir()
    pq.write_table(pa.table({"k": list(range(rows)), "v": [f"value {i}" for i in range(rows)]}),
                   d / "part-0.parquet")
    return str(d)


AGGS = (F.sum("q").alias("sum_q"), F.avg("q").alias("avg_q"), F.count(F.lit(1)).alias("n"))

# ---- two-phase aggregation -----------------------------------------------------------------------


def test_keyed_aggregation_is_split_around_the_hash_exchange() -> None:
    env = _configured()
    (env.from_source(FakeSource()).filter("q > 0").key_by("k").agg(*AGGS).uid("agg")
        .sink_to(FakeSink()))
    first, merge = env.get_job_graph().vertices
    assert first.name == "Source: Fake: /data -> Filter -> LocalKeyedAggregate"
    assert merge.name == "GlobalKeyedAggregate -> Sink: Fake: /out"
    assert first.results[0].ship_strategy is HASH and first.results[0].key_columns == ("k",)
    local = _chain(first).nodes[-1]
    assert isinstance(local.spec, LocalAggregateSpec)
    assert local.spec.keys == ("k",)
    assert list(map(repr, local.spec.aggregates)) == list(map(repr, AGGS))
    assert local.operator_id == operator_id_from_uid("agg-local")
    head = _chain(merge).head()
    assert isinstance(head.spec, MergeAggregateSpec) and head.operator_id == operator_id_from_uid("agg")


def test_global_aggregation_is_split_around_the_global_exchange() -> None:
    env = _configured()
    env.from_source(FakeSource()).agg(*AGGS).sink_to(FakeSink())
    names = [v.name for v in env.get_job_graph().vertices]
    assert names == ["Source: Fake: /data -> LocalAggregate", "GlobalAggregate -> Sink: Fake: /out"]


def test_a_named_aggregation_keeps_its_name_on_the_global_phase() -> None:
    env = _configured()
    env.from_source(FakeSource()).key_by("k").agg(*AGGS).name("totals").sink_to(FakeSink())
    names = [v.name for v in env.get_job_graph().vertices]
    assert names == ["Source: Fake: /data -> totals (local)", "totals -> Sink: Fake: /out"]


@pytest.mark.parametrize("aggs", [
    (F.countDistinct("q").alias("d"),),
    ("sum(q) AS s",),
    (F.sum("q"),),
    (F.collect_list("q").alias("l"),),
], ids=["distinct", "sql-string", "unnamed", "not-decomposable"])
def test_undecomposable_aggregations_stay_one_phase(aggs: tuple) -> None:
    env = _configured()
    env.from_source(FakeSource()).key_by("k").agg(*aggs).sink_to(FakeSink())
    first, agg = env.get_job_graph().vertices
    assert first.name == "Source: Fake: /data"
    assert isinstance(_chain(agg).head().spec, KeyedAggregateSpec)


def test_one_phase_strategy_turns_it_off() -> None:
    env = _configured(conf={"table.optimizer.agg-phase-strategy": "ONE_PHASE"})
    env.from_source(FakeSource()).key_by("k").agg(*AGGS).sink_to(FakeSink())
    assert [v.name for v in env.get_job_graph().vertices] == [
        "Source: Fake: /data", "KeyedAggregate -> Sink: Fake: /out"]


def test_bad_agg_phase_strategy_is_rejected_by_name() -> None:
    with pytest.raises(IllegalConfigurationException, match="table.optimizer.agg-phase-strategy"):
        _configured(conf={"table.optimizer.agg-phase-strategy": "THREE_PHASE"})


@pytest.mark.parametrize(("strategy", "names"), [
    ("AUTO", ["Source: Fake: /data", "Filter", "KeyedAggregate -> Sink: Fake: /out"]),
    ("TWO_PHASE", ["Source: Fake: /data", "Filter", "LocalKeyedAggregate",
                   "GlobalKeyedAggregate -> Sink: Fake: /out"]),
])
def test_auto_splits_only_when_the_local_phase_chains(strategy: str, names: list[str]) -> None:
    env = _configured(conf={"table.optimizer.agg-phase-strategy": strategy})
    (env.from_source(FakeSource()).filter("q > 0").disable_chaining().key_by("k").agg(*AGGS)
        .sink_to(FakeSink()))
    assert [v.name for v in env.get_job_graph().vertices] == names


def test_an_aggregation_of_a_parallelism_one_input_is_not_split() -> None:
    env = _configured(p=1)
    env.from_source(FakeSource()).agg(*AGGS).sink_to(FakeSink())
    assert [v.name for v in env.get_job_graph().vertices] == [
        "Source: Fake: /data -> Aggregate -> Sink: Fake: /out"]


# ---- broadcast joins -----------------------------------------------------------------------------


def _no_auto() -> dict[str, str]:
    return {"table.optimizer.join.broadcast-threshold": "-1"}


def test_broadcast_hint_chains_the_join_to_its_probe_side() -> None:
    env = _configured(conf=_no_auto())
    big = env.from_source(FakeSource("Fake: /big"))
    small = env.from_source(FakeSource("Fake: /small"))
    big.filter("k > 0").join(small.broadcast(), on="k").sink_to(FakeSink())
    jg = env.get_job_graph()
    small_v, big_v = jg.vertices  # the broadcast producer comes first: the JobGraph is topological
    assert small_v.name == "Source: Fake: /small"
    assert big_v.name == "Source: Fake: /big -> Filter -> Join -> Sink: Fake: /out"
    assert small_v.results[0].ship_strategy is BROADCAST
    assert [(e.ship_strategy, e.type_number) for e in big_v.inputs] == [(BROADCAST, 0)]
    source, _filter, join, _sink = _chain(big_v).nodes
    assert source.gate_inputs == () and join.gate_inputs == (0,) and join.chained_input == 1
    assert join.spec == JoinSpec("inner", ("k",), ("k",), "right")


def test_left_side_broadcast_for_an_inner_or_right_join() -> None:
    env = _configured(conf=_no_auto())
    small = env.from_source(FakeSource("Fake: /small"))
    big = env.from_source(FakeSource("Fake: /big"))
    small.broadcast().join(big, on="k", how="right").sink_to(FakeSink())
    names = [v.name for v in env.get_job_graph().vertices]
    assert names == ["Source: Fake: /small", "Source: Fake: /big -> Join -> Sink: Fake: /out"]


def test_cross_join_broadcasts_its_right_side_and_chains_to_the_left() -> None:
    env = _configured(conf=_no_auto())
    big = env.from_source(FakeSource("Fake: /big"))
    total = env.from_source(FakeSource("Fake: /small")).agg(F.sum("v").alias("total"))
    big.filter("k > 0").cross_join(total).filter("v > total").sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [v.name for v in jg.vertices] == [
        "Source: Fake: /small -> LocalAggregate", "GlobalAggregate",
        "Source: Fake: /big -> Filter -> CrossJoin -> Filter -> Sink: Fake: /out"]
    total_v, big_v = jg.vertices[1:]
    assert total_v.results[0].ship_strategy is BROADCAST
    assert [(e.ship_strategy, e.type_number) for e in big_v.inputs] == [(BROADCAST, 0)]
    join = _chain(big_v).nodes[2]
    assert join.spec == JoinSpec("cross", (), (), "right") and join.gate_inputs == (0,)


def test_cross_join_keeps_a_broadcast_left_side_and_refuses_two() -> None:
    env = _configured(conf=_no_auto())
    small = env.from_source(FakeSource("Fake: /small"))
    big = env.from_source(FakeSource("Fake: /big"))
    small.broadcast().cross_join(big).sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [v.name for v in jg.vertices] == [
        "Source: Fake: /small", "Source: Fake: /big -> CrossJoin -> Sink: Fake: /out"]
    assert _chain(jg.vertices[1]).nodes[1].spec == JoinSpec("cross", (), (), "left")
    with pytest.raises(InvalidProgramException, match="both inputs are broadcast"):
        small.broadcast().cross_join(big.broadcast())


@pytest.mark.parametrize(("build", "how", "message"), [
    ("right", "full", "cannot broadcast its right side"),
    ("right", "right", "cannot broadcast its right side"),
    ("left", "left", "cannot broadcast its left side"),
    ("left", "semi", "cannot broadcast its left side"),
    ("both", "inner", "both inputs are broadcast"),
])
def test_broadcasts_that_would_duplicate_unmatched_rows_are_rejected(build: str, how: str,
                                                                       message: str) -> None:
    env = _configured()
    a = env.from_source(FakeSource("Fake: /a"))
    b = env.from_source(FakeSource("Fake: /b"))
    left = a.broadcast() if build in ("left", "both") else a
    right = b.broadcast() if build in ("right", "both") else b
    with pytest.raises(InvalidProgramException, match=message):
        left.join(right, on="k", how=how)


def test_a_broadcast_join_that_would_feed_its_own_vertex_stays_a_chain_head() -> None:
    env = _configured(conf=_no_auto())
    src = env.from_source(FakeSource())
    counts = src.key_by("k").agg(F.count(F.lit(1)).alias("n"))
    src.join(counts.broadcast(), on="k").sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [v.name for v in jg.vertices] == [
        "Source: Fake: /data -> LocalKeyedAggregate", "GlobalKeyedAggregate",
        "Join -> Sink: Fake: /out"]
    join = jg.vertices[2]
    assert [e.ship_strategy for e in join.inputs] == [ShipStrategy.FORWARD, BROADCAST]


def test_small_file_inputs_are_broadcast_automatically(tmp_path: Path) -> None:
    big_path, small_path = _parquet_dir(tmp_path, "big", 20_000), _parquet_dir(tmp_path, "small", 10)
    small_bytes = sum(p.stat().st_size for p in Path(small_path).iterdir())
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": str(small_bytes)})
    big = env.from_source(FileSource.parquet(big_path), "big")
    small = env.from_source(FileSource.parquet(small_path), "small")
    big.join(small.select("k"), on="k", how="left").sink_to(FakeSink())
    small_v, big_v = env.get_job_graph().vertices
    assert small_v.name == "Source: small -> Select"
    assert big_v.name == "Source: big -> Join -> Sink: Fake: /out"
    assert _chain(big_v).nodes[1].spec.broadcast == "right"


def test_the_default_threshold_is_sparks_ten_mib(tmp_path: Path) -> None:
    """A side estimated above Flink's 1 MB but below Spark's 10 MiB is broadcast by default;
    one estimated above 10 MiB is not (``small``: 2.6 MB of rows, ``big``: 29.7 MB)."""
    big_path, small_path = (_parquet_dir(tmp_path, "big", 1_200_000),
                            _parquet_dir(tmp_path, "small", 100_000))
    env = _configured()
    big = env.from_source(FileSource.parquet(big_path), "big")
    small = env.from_source(FileSource.parquet(small_path), "small")
    big.join(small, on="k").sink_to(FakeSink())
    small_v, big_v = env.get_job_graph().vertices
    assert small_v.name == "Source: small"
    assert big_v.name == "Source: big -> Join -> Sink: Fake: /out"
    assert _chain(big_v).nodes[1].spec.broadcast == "right"
    # the same join with the smaller side scaled past 10 MiB exchanges both sides
    env = _configured()
    env.from_source(FileSource.parquet(big_path), "a").join(
        env.from_source(FileSource.parquet(big_path), "b"), on="k").sink_to(FakeSink())
    assert [v.name for v in env.get_job_graph().vertices] == [
        "Source: a", "Source: b", "Join -> Sink: Fake: /out"]


@pytest.mark.parametrize(("threshold", "how"), [("-1", "inner"), ("10", "inner"), ("1g", "full")])
def test_no_automatic_broadcast_when_off_too_big_or_not_allowed(tmp_path: Path, threshold: str,
                                                                 how: str) -> None:
    a, b = _parquet_dir(tmp_path, "a", 100), _parquet_dir(tmp_path, "b", 100)
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": threshold})
    env.from_source(FileSource.parquet(a), "a").join(
        env.from_source(FileSource.parquet(b), "b"), on="k", how=how).sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [v.name for v in jg.vertices] == ["Source: a", "Source: b", "Join -> Sink: Fake: /out"]
    assert [e.ship_strategy for e in jg.vertices[2].inputs] == [HASH, HASH]


def test_sides_of_unknown_size_are_not_broadcast(tmp_path: Path) -> None:
    a = _parquet_dir(tmp_path, "a", 100)
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": "1g"})
    src = env.from_source(FileSource.parquet(a), "a")
    per_key = src.key_by("k").agg(F.count(F.lit(1)).alias("n"))
    per_key.join(env.from_source(FakeSource()), on="k").sink_to(FakeSink())
    join = env.get_job_graph().vertices[-1]
    assert join.name == "Join -> Sink: Fake: /out"
    assert [e.ship_strategy for e in join.inputs] == [HASH, HASH]


def test_a_large_side_joined_with_one_of_unknown_size_is_the_probe_side(tmp_path: Path) -> None:
    """The AdaptiveBatchScheduler may move the join into that side's producer at run time."""
    a = _parquet_dir(tmp_path, "a", 2000)
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": "10"})
    per_key = env.from_source(FakeSource()).key_by("k").agg(F.count(F.lit(1)).alias("n"))
    env.from_source(FileSource.parquet(a), "a").join(per_key, on="k").select("v", "n") \
        .sink_to(FakeSink())
    join = env.get_job_graph().vertices[-1]
    assert (join.adaptive_join, join.adaptive_join_probe) == ("inner", "left")
    assert _chain(join).nodes[0].spec.probe == "left"


@pytest.mark.parametrize(("how", "probe"), [
    ("inner", "right"), ("right", "right"),
    ("left", "any"),     # cannot broadcast the left side; its right side is not cut either
    ("semi", "right"),   # cannot broadcast the left side; the runtime filter (on by default,
    ("full", "any"),     # below) cuts the right side; neither
])
def test_the_probe_side_needs_a_join_type_that_broadcasts_the_other_or_drops_its_rows(
        tmp_path: Path, how: str, probe: str) -> None:
    a = _parquet_dir(tmp_path, "a", 2000)
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": "10"})
    per_key = env.from_source(FakeSource()).key_by("k").agg(F.count(F.lit(1)).alias("n"))
    per_key.join(env.from_source(FileSource.parquet(a), "a"), on="k", how=how).select("v", "n") \
        .sink_to(FakeSink())
    assert env.get_job_graph().vertices[-1].adaptive_join_probe == probe


def test_either_side_may_be_the_probe_when_neither_size_is_known() -> None:
    """The scheduler then moves the join into whichever producer starts after the other side
    finished."""
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": "10"})
    env.from_source(FakeSource()).join(env.from_source(FakeSource()), on="k").select("k") \
        .sink_to(FakeSink())
    join = env.get_job_graph().vertices[-1]
    assert (join.adaptive_join, join.adaptive_join_probe) == ("inner", "any")
    assert _chain(join).nodes[0].spec.probe == ""


@pytest.mark.parametrize("enabled, probe", [(None, "right"), ("true", "right"), ("false", "any")])
def test_with_the_runtime_filter_a_semi_joins_large_right_side_is_the_probe_side(
        tmp_path: Path, enabled: str | None, probe: str) -> None:
    """table.optimizer.runtime-filter.enabled is on by default."""
    a = _parquet_dir(tmp_path, "a", 2000)
    conf = {"table.optimizer.join.broadcast-threshold": "10"}
    if enabled is not None:
        conf["table.optimizer.runtime-filter.enabled"] = enabled
    env = _configured(conf=conf)
    per_key = env.from_source(FakeSource()).key_by("k").agg(F.count(F.lit(1)).alias("n"))
    per_key.join(env.from_source(FileSource.parquet(a), "a"), on="k", how="semi").select("n") \
        .sink_to(FakeSink())
    assert env.get_job_graph().vertices[-1].adaptive_join_probe == probe


def test_no_probe_side_when_the_columns_after_the_join_are_unknown(tmp_path: Path) -> None:
    """A sink reads every column: the joined rows' exchange could not be cut to what it reads."""
    a = _parquet_dir(tmp_path, "a", 2000)
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": "10"})
    per_key = env.from_source(FakeSource()).key_by("k").agg(F.count(F.lit(1)).alias("n"))
    env.from_source(FileSource.parquet(a), "a").join(per_key, on="k").sink_to(FakeSink())
    join = env.get_job_graph().vertices[-1]
    assert (join.adaptive_join, join.adaptive_join_probe) == ("inner", "")


# ---- size estimates: footers, projections, filter selectivity -------------------------------------


def _wide_dir(root: Path, rows: int = 4000) -> tuple[str, int, int]:
    """A Parquet table with a key ``k``, a narrow ``n`` and a wide ``v``; returns the path and
    the uncompressed bytes of ``k`` and of the whole table (from the footers)."""
    from flintlock.connectors.file import FileSource as FS
    from flintlock.connectors.parquet_statistics import parquet_statistics

    d = root / "wide"
    d.mkdir()
    pq.write_table(pa.table({"k": list(range(rows)), "n": [i % 7 for i in range(rows)],
                             "v": [f"{i:08d}" * 40 for i in range(rows)]}), d / "part-0.parquet")
    stats = parquet_statistics(FS.parquet(str(d)).list_files())
    assert stats is not None and stats.rows == rows
    return str(d), stats.column_bytes["k"], sum(stats.column_bytes.values())


def _join_with(env: StreamExecutionEnvironment, side) -> list[ShipStrategy]:  # type: ignore[no-untyped-def]
    env.from_source(FakeSource("Fake: /big")).join(side, on="k").sink_to(FakeSink())
    return [e.ship_strategy for v in env.get_job_graph().vertices for e in v.inputs]


def test_a_projection_to_narrow_columns_makes_a_wide_table_broadcast(tmp_path: Path) -> None:
    path, k_bytes, total = _wide_dir(tmp_path)
    threshold = {"table.optimizer.join.broadcast-threshold": str((k_bytes + total) // 2)}
    env = _configured(conf=threshold)
    assert _join_with(env, env.from_source(FileSource.parquet(path), "w").select("k")) == [BROADCAST]
    env = _configured(conf=threshold)
    assert _join_with(env, env.from_source(FileSource.parquet(path), "w")) == [HASH, HASH]
    env = _configured(conf=threshold)  # with_column and aliases are traced to the columns read
    side = (env.from_source(FileSource.parquet(path), "w")
            .with_column("k2", F.col("k") * 2).select(F.col("k2").alias("k")))
    assert _join_with(env, side) == [BROADCAST]
    env = _configured(conf=threshold)  # a SQL expression may read anything: the whole row
    assert _join_with(env, env.from_source(FileSource.parquet(path), "w").select("k + 0 AS k")) \
        == [HASH, HASH]


@pytest.mark.parametrize(("condition", "broadcast"), [
    (F.col("n") == 3, True),                       # 0.15
    (F.col("n") > 3, False),                       # 0.5
    ((F.col("n") > 3) & (F.col("n") < 5), False),  # 0.5 x 0.5
    ((F.col("n") > 3) & (F.col("n") < 5) & (F.col("k") > 0), True),  # 0.5 x 0.5 x 0.5
    ("n = 3", False),                              # a SQL string: 0.25
])
def test_filters_scale_the_estimate_by_calcites_selectivity(tmp_path: Path, condition: object,
                                                             broadcast: bool) -> None:
    path, k_bytes, _ = _wide_dir(tmp_path)
    # between 0.15x and 0.25x of the key column: only an equality filter gets below it
    env = _configured(conf={"table.optimizer.join.broadcast-threshold": str(int(k_bytes * 0.2))})
    side = env.from_source(FileSource.parquet(path), "w").filter(condition).select("k")
    expected = [BROADCAST] if broadcast else [HASH, HASH]
    assert _join_with(env, side) == expected
