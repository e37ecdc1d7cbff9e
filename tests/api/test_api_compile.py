"""The DataStream API compiles to the StreamGraph / JobGraph Flink would build."""

from __future__ import annotations

import json
import threading

import cloudpickle
import pytest
from flintlock_api_fakes import FakeSink, FakeSource, install_connector_standins
from pyspark.sql import functions as F

from flintlock import Configuration, SlotSharingGroup, StreamExecutionEnvironment
from flintlock.api.exceptions import InvalidProgramException
from flintlock.graph.stream_graph_generator import operator_id_from_uid
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.jobgraph.types import JobType, ResultPartitionType, ShipStrategy
from flintlock.runtime.operators.specs import (
    DistinctSpec,
    FilterFunctionSpec,
    FilterSpec,
    GlobalAggregateSpec,
    JoinSpec,
    KeyedAggregateSpec,
    LimitSpec,
    MapSpec,
    SerializedFunction,
    SortSpec,
    WithColumnSpec,
)

HASH, FWD, REB, GLOBAL = (ShipStrategy.HASH, ShipStrategy.FORWARD, ShipStrategy.REBALANCE,
                          ShipStrategy.GLOBAL)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLINTLOCK_CONF_DIR", raising=False)
    monkeypatch.delenv("FLINK_CONF_DIR", raising=False)
    install_connector_standins(monkeypatch)


def _env(p: int = 4, agg_phases: str = "ONE_PHASE") -> StreamExecutionEnvironment:
    """An environment of parallelism ``p``; one-phase aggregation unless asked (these tests check
    the chaining rules; two-phase aggregation has its own tests)."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(p)
    return env.configure({"table.optimizer.agg-phase-strategy": agg_phases})


def _names(env: StreamExecutionEnvironment) -> list[str]:
    return [v.name for v in env.get_job_graph().vertices]


def _chain(v):
    return cloudpickle.loads(v.invokable_payload)


def _plan(env: StreamExecutionEnvironment) -> dict:
    return json.loads(env.get_execution_plan())


def test_q1_source_and_filter_chain_into_one_vertex_with_a_hash_edge() -> None:
    env = _env()
    src = env.from_source(FakeSource("Parquet: /lineitem"))
    (src.filter(F.col("l_shipdate") <= F.lit("1998-09-02"))
        .key_by("l_returnflag", "l_linestatus")
        .agg(F.sum("l_quantity").alias("sum_qty"), F.count(F.lit(1)).alias("count_order"))
        .sort("l_returnflag", "l_linestatus")
        .sink_to(FakeSink()))
    jg = env.get_job_graph()
    assert jg.job_type is JobType.BATCH
    assert [v.name for v in jg.vertices] == [
        "Source: Parquet: /lineitem -> Filter", "KeyedAggregate", "Sort -> Sink: Fake: /out"]
    first, agg, sort = jg.vertices
    assert first.results[0].ship_strategy is HASH
    assert first.results[0].key_columns == ("l_returnflag", "l_linestatus")
    assert agg.inputs[0].ship_strategy is HASH and sort.inputs[0].ship_strategy is GLOBAL
    assert (first.parallelism, agg.parallelism, sort.parallelism) == (4, 4, 1)
    assert all(d.result_type is ResultPartitionType.BLOCKING for v in jg for d in v.results)
    specs = [n.spec for n in _chain(first).nodes]
    assert isinstance(specs[1], FilterSpec)
    agg_spec = _chain(agg).head().spec
    assert isinstance(agg_spec, KeyedAggregateSpec)
    assert agg_spec.keys == ("l_returnflag", "l_linestatus") and len(agg_spec.aggregates) == 2
    assert isinstance(_chain(sort).head().spec, SortSpec)


def test_q1_aggregates_in_two_phases_by_default() -> None:
    env = _env(agg_phases="AUTO")
    (env.from_source(FakeSource("Parquet: /lineitem"))
        .filter(F.col("l_shipdate") <= F.lit("1998-09-02"))
        .key_by("l_returnflag", "l_linestatus")
        .agg(F.sum("l_quantity").alias("sum_qty"), F.avg("l_discount").alias("avg_disc"),
             F.count(F.lit(1)).alias("count_order"))
        .sort("l_returnflag", "l_linestatus")
        .sink_to(FakeSink()))
    jg = env.get_job_graph()
    # the producer pre-aggregates per key before the HASH exchange (Flink LocalGroupAggregate)
    assert [v.name for v in jg.vertices] == [
        "Source: Parquet: /lineitem -> Filter -> LocalKeyedAggregate",
        "GlobalKeyedAggregate", "Sort -> Sink: Fake: /out"]
    first, agg, _sort = jg.vertices
    assert first.results[0].ship_strategy is HASH
    assert first.results[0].key_columns == ("l_returnflag", "l_linestatus")
    assert agg.inputs[0].ship_strategy is HASH


def test_count_distinct_is_not_split_into_two_phases() -> None:
    env = _env(agg_phases="AUTO")
    (env.from_source(FakeSource()).key_by("k")
        .agg(F.count_distinct("x").alias("n")).sink_to(FakeSink()))
    assert _names(env) == ["Source: Fake: /data", "KeyedAggregate -> Sink: Fake: /out"]


def test_plan_json_lists_every_operator_with_its_ship_strategy() -> None:
    env = _env(2)
    env.from_source(FakeSource()).filter("x > 1").key_by("k").count().print()
    nodes = _plan(env)["nodes"]
    assert [n["type"] for n in nodes] == ["Source: Fake: /data", "Filter", "KeyedAggregate",
                                          "Sink: Print"]
    assert [n["pact"] for n in nodes] == ["Data Source", "Operator", "Operator", "Data Sink"]
    assert [p["ship_strategy"] for n in nodes[1:] for p in n["predecessors"]] == [
        "FORWARD", "HASH", "FORWARD"]
    assert "predecessors" not in nodes[0]


@pytest.mark.parametrize(
    ("build", "expected_vertices", "strategy"),
    [
        (lambda s: s.filter("a > 1"), 1, None),
        (lambda s: s.rebalance().filter("a > 1"), 2, REB),
        (lambda s: s.rescale().filter("a > 1"), 2, ShipStrategy.RESCALE),
        (lambda s: s.broadcast().filter("a > 1"), 2, ShipStrategy.BROADCAST),
        (lambda s: s.forward().filter("a > 1"), 1, None),
        (lambda s: s.global_().filter("a > 1"), 2, GLOBAL),
        (lambda s: s.filter("a > 1").set_parallelism(3), 2, REB),
        (lambda s: s.filter("a > 1").disable_chaining(), 3, FWD),
        (lambda s: s.filter("a > 1").start_new_chain(), 2, FWD),
        (lambda s: s.filter("a > 1").slot_sharing_group("other"), 2, FWD),
        (lambda s: s.key_by("a").filter("a > 1"), 2, HASH),
    ],
)
def test_partitioning_and_chaining_between_source_and_an_operator(
    build, expected_vertices: int, strategy: ShipStrategy | None
) -> None:
    env = _env(2)
    out = build(env.from_source(FakeSource()))
    out.sink_to(FakeSink())
    jg = env.get_job_graph()
    assert len(jg.vertices) == expected_vertices
    if strategy is not None:
        assert jg.vertices[0].results[0].ship_strategy is strategy


def test_explicit_forward_across_a_parallelism_change_is_an_error() -> None:
    env = _env(2)
    env.from_source(FakeSource()).forward().filter("a > 1").set_parallelism(3).sink_to(FakeSink())
    with pytest.raises(InvalidProgramException, match="Forward partitioning does not allow"):
        env.get_job_graph()


def test_env_disable_operator_chaining_gives_one_vertex_per_operator() -> None:
    env = _env(2).disable_operator_chaining()
    env.from_source(FakeSource()).filter("a > 1").select("a").sink_to(FakeSink())
    assert _names(env) == ["Source: Fake: /data", "Filter", "Select", "Sink: Fake: /out"]
    assert env.get_job_graph().configuration["pipeline.operator-chaining.enabled"] == "false"


def test_slot_sharing_group_is_inherited_downstream() -> None:
    env = _env(2)
    env.from_source(FakeSource()).slot_sharing_group("g").filter("a > 1").sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [(v.name, v.slot_sharing_group) for v in jg.vertices] == [
        ("Source: Fake: /data -> Filter -> Sink: Fake: /out", "g")]


def test_slot_sharing_group_resources_reach_the_job_graph() -> None:
    env = _env(2)
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(1.5).set_task_heap_memory_mb(256) \
        .set_managed_memory_mb(64).build()
    env.register_slot_sharing_group(
        SlotSharingGroup.builder("light").set_cpu_cores(0.5).set_task_heap_memory_mb(32).build())
    src = env.from_source(FakeSource())
    src.filter("a > 1").slot_sharing_group(heavy).sink_to(FakeSink())
    src.select("a").slot_sharing_group("light").disable_chaining().sink_to(FakeSink("/o2"))
    jg = env.get_job_graph()
    assert {v.slot_sharing_group for v in jg.vertices} == {"default", "heavy", "light"}
    assert jg.slot_sharing_group_resources == {
        "heavy": ResourceProfile.of(1.5, 256, 0, 64), "light": ResourceProfile.of(0.5, 32)}


def test_slot_sharing_group_resources_are_validated() -> None:
    with pytest.raises(ValueError, match="required to be set together"):
        SlotSharingGroup.builder("g").set_cpu_cores(1.0).build()
    with pytest.raises(ValueError, match="CPU cores must be > 0"):
        SlotSharingGroup.builder("g").set_cpu_cores(0)
    with pytest.raises(ValueError, match="task heap memory"):
        SlotSharingGroup.builder("g").set_task_heap_memory_mb(-1)
    assert SlotSharingGroup.builder("plain").build().resource_profile.is_unknown
    env = _env(1)
    with pytest.raises(ValueError, match="no resources to register"):
        env.register_slot_sharing_group(SlotSharingGroup("plain"))
    one = SlotSharingGroup.builder("g").set_cpu_cores(1).set_task_heap_memory_mb(10).build()
    two = SlotSharingGroup.builder("g").set_cpu_cores(2).set_task_heap_memory_mb(10).build()
    src = env.from_source(FakeSource())
    src.filter("a > 1").slot_sharing_group(one).sink_to(FakeSink())
    src.filter("a > 2").slot_sharing_group(two).sink_to(FakeSink("/o2"))
    with pytest.raises(InvalidProgramException, match="two different resources"):
        env.get_job_graph()


def test_join_reads_left_on_gate_0_and_right_on_gate_1_hash_partitioned() -> None:
    env = _env(2)
    left = env.from_source(FakeSource("L")).filter("a > 0")
    right = env.from_source(FakeSource("R"))
    left.join(right, left_on="a", right_on=["b"], how="left_outer").sink_to(FakeSink())
    jg = env.get_job_graph()
    lv, rv, jv = jg.vertices
    assert (lv.name, rv.name, jv.name) == ("Source: L -> Filter", "Source: R",
                                          "Join -> Sink: Fake: /out")
    assert [jg.dataset(e.source).producer for e in jv.inputs] == [lv.id, rv.id]
    assert [e.type_number for e in jv.inputs] == [0, 1]
    assert lv.results[0].key_columns == ("a",) and rv.results[0].key_columns == ("b",)
    assert all(e.ship_strategy is HASH for e in jv.inputs)
    head = _chain(jv).head()
    assert head.spec == JoinSpec("left", ("a",), ("b",)) and head.gate_inputs == (0, 1)


@pytest.mark.parametrize("kwargs", [{}, {"on": "a", "left_on": "a", "right_on": "a"},
                                    {"on": "a", "how": "cross"}, {"left_on": ["a", "b"],
                                                                  "right_on": ["a"]}])
def test_join_argument_errors(kwargs) -> None:
    env = _env(2)
    left, right = env.from_source(FakeSource("L")), env.from_source(FakeSource("R"))
    with pytest.raises(ValueError):
        left.join(right, **kwargs)


def test_union_has_one_gate_per_input_in_order() -> None:
    env = _env(2)
    a, b, c = (env.from_source(FakeSource(n)) for n in "abc")
    a.union(b, c).sink_to(FakeSink())
    jg = env.get_job_graph()
    u = jg.vertices[-1]
    assert u.name == "Union -> Sink: Fake: /out"
    producers = [jg.vertex(jg.dataset(e.source).producer).name for e in u.inputs]
    assert producers == ["Source: a", "Source: b", "Source: c"]
    assert _chain(u).head().gate_inputs == (0, 1, 2)


def test_distinct_hashes_on_all_columns() -> None:
    env = _env(2)
    env.from_source(FakeSource()).distinct().sink_to(FakeSink())
    jg = env.get_job_graph()
    ds = jg.vertices[0].results[0]
    assert (ds.ship_strategy, ds.key_columns) == (HASH, ())
    assert isinstance(_chain(jg.vertices[1]).head().spec, DistinctSpec)


def test_global_aggregate_runs_at_parallelism_one_after_a_global_edge() -> None:
    env = _env(3)
    env.from_source(FakeSource()).agg(F.sum("x").alias("x")).sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [(v.name, v.parallelism) for v in jg.vertices] == [
        ("Source: Fake: /data", 3), ("Aggregate -> Sink: Fake: /out", 1)]
    assert jg.vertices[1].inputs[0].ship_strategy is GLOBAL
    assert isinstance(_chain(jg.vertices[1]).head().spec, GlobalAggregateSpec)


def test_sort_after_a_parallelism_one_operator_chains_instead_of_a_global_exchange() -> None:
    env = _env(1)
    env.from_source(FakeSource()).sort(F.col("n").desc(), "m").sink_to(FakeSink())
    assert _names(env) == ["Source: Fake: /data -> Sort -> Sink: Fake: /out"]


def test_limit_is_local_then_global() -> None:
    env = _env(4)
    env.from_source(FakeSource()).limit(5).sink_to(FakeSink())
    jg = env.get_job_graph()
    assert [(v.name, v.parallelism) for v in jg.vertices] == [
        ("Source: Fake: /data -> Limit", 4), ("Limit -> Sink: Fake: /out", 1)]
    assert jg.vertices[1].inputs[0].ship_strategy is GLOBAL
    assert _chain(jg.vertices[0]).nodes[1].spec == LimitSpec(5)


def test_limit_at_parallelism_one_is_a_single_operator() -> None:
    env = _env(1)
    env.from_source(FakeSource()).limit(5).sink_to(FakeSink())
    assert _names(env) == ["Source: Fake: /data -> Limit -> Sink: Fake: /out"]


def test_non_parallel_operators_refuse_another_parallelism() -> None:
    env = _env(2)
    with pytest.raises(ValueError, match="non parallel"):
        env.from_source(FakeSource()).sort("a").set_parallelism(2)


def test_settings_on_a_partitioning_are_rejected() -> None:
    env = _env(2)
    with pytest.raises(InvalidProgramException, match="partitioning"):
        env.from_source(FakeSource()).key_by("a").name("x")


def test_key_by_an_aliased_column_adds_the_column_first() -> None:
    env = _env(2)
    (env.from_source(FakeSource()).key_by((F.col("a") % 10).alias("bucket"), F.col("b"))
        .count().sink_to(FakeSink()))
    jg = env.get_job_graph()
    first = jg.vertices[0]
    assert first.name == "Source: Fake: /data -> WithColumn"
    assert _chain(first).nodes[1].spec.name == "bucket"
    assert isinstance(_chain(first).nodes[1].spec, WithColumnSpec)
    assert first.results[0].key_columns == ("bucket", "b")


def test_key_by_a_column_without_a_name_is_an_error() -> None:
    env = _env(2)
    with pytest.raises(ValueError, match="alias"):
        env.from_source(FakeSource()).key_by(F.col("a") % 10)


def test_keyed_sum_keeps_the_column_name() -> None:
    env = _env(2)
    env.from_source(FakeSource()).key_by("k").sum("v").sink_to(FakeSink())
    spec = _chain(env.get_job_graph().vertices[1]).head().spec
    assert spec.keys == ("k",) and "AS v" in str(spec.aggregates[0])


def test_user_functions_are_pickled_into_serialized_functions() -> None:
    env = _env(2)

    def keep(row):
        return row.a > 1

    env.from_source(FakeSource()).filter(keep).map(lambda r: (r.a,), "a int").sink_to(FakeSink())
    nodes = _chain(env.get_job_graph().vertices[0]).nodes
    f, m = nodes[1].spec, nodes[2].spec
    assert isinstance(f, FilterFunctionSpec) and isinstance(m, MapSpec)
    assert isinstance(f.fn, SerializedFunction) and f.fn.name.endswith("keep")
    assert cloudpickle.loads(f.fn.payload)(type("R", (), {"a": 2})()) is True
    assert m.output_schema == "a int"


def test_an_unpicklable_function_names_the_function_and_the_operator() -> None:
    env = _env(2)
    lock = threading.Lock()

    def uses_a_lock(row):
        with lock:
            return (row.a,)

    env.from_source(FakeSource()).map(uses_a_lock, "a int").name("MyMap").sink_to(FakeSink())
    with pytest.raises(InvalidProgramException) as info:
        env.get_job_graph()
    msg = str(info.value)
    assert "Cannot serialize the function" in msg and "uses_a_lock" in msg and "'MyMap'" in msg


def test_automatic_mode_compiles_as_batch() -> None:
    env = _env(2)
    env.from_source(FakeSource()).sink_to(FakeSink())
    jg = env.get_job_graph("my job")
    assert jg.job_type is JobType.BATCH and jg.name == "my job"
    assert jg.configuration["execution.runtime-mode"] == "BATCH"
    assert jg.configuration["parallelism.default"] == "2"


def test_uids_give_deterministic_operator_ids_and_must_be_unique() -> None:
    env = _env(2)
    env.from_source(FakeSource()).uid("src").filter("a > 1").uid("flt").sink_to(FakeSink())
    v = env.get_job_graph().vertices[0]
    assert v.operator_ids[:2] == (operator_id_from_uid("src"), operator_id_from_uid("flt"))
    assert v.id.hex == operator_id_from_uid("src").hex
    env.from_source(FakeSource()).uid("src").sink_to(FakeSink())
    with pytest.raises(InvalidProgramException, match="Duplicate uid 'src'"):
        env.get_job_graph()


def test_a_program_without_sinks_cannot_be_compiled() -> None:
    env = _env(2)
    env.from_source(FakeSource()).filter("a > 1")
    with pytest.raises(InvalidProgramException, match="No operators defined"):
        env.get_execution_plan()


def test_operators_not_reaching_a_sink_are_left_out() -> None:
    env = _env(2)
    src = env.from_source(FakeSource())
    src.filter("a > 1")  # dangling
    src.select("a").sink_to(FakeSink())
    assert _names(env) == ["Source: Fake: /data -> Select -> Sink: Fake: /out"]


def test_a_source_shared_by_two_sinks_is_translated_once() -> None:
    env = _env(2)
    src = env.from_source(FakeSource())
    src.filter("a > 1").sink_to(FakeSink("A"))
    src.key_by("a").count().sink_to(FakeSink("B"))
    jg = env.get_job_graph()
    assert [v.name for v in jg.vertices] == [
        "Source: Fake: /data -> Filter -> Sink: A", "KeyedAggregate -> Sink: B"]
    assert [s.text for s in jg.vertices[0].sinks] == ["A"]


def test_streams_of_different_environments_cannot_be_combined() -> None:
    a = _env(2).from_source(FakeSource())
    b = _env(2).from_source(FakeSource())
    with pytest.raises(InvalidProgramException, match="different environments"):
        a.union(b)


# ---- parallelism and max parallelism -----------------------------------------------------------


def test_default_parallelism_local_is_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_parallelism() == 6


def test_configured_parallelism_default_wins_over_the_cpu_count() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"parallelism.default": 3}))
    assert env.get_parallelism() == 3


def test_remote_target_without_a_default_uses_one() -> None:
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"execution.target": "remote"}))
    assert env.get_parallelism() == 1


def test_cli_overrides_win_over_config_but_set_parallelism_wins_over_all() -> None:
    context = pytest.importorskip("flintlock.client.context")
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"parallelism.default": 3}))
    ctx = context.ClientContext(overrides=Configuration({"parallelism.default": 5}))
    with context.client_context(ctx):
        assert env.get_parallelism() == 5
        env.set_parallelism(7)
        assert env.get_parallelism() == 7


def test_cluster_config_file_is_the_lowest_layer(tmp_path, monkeypatch) -> None:
    (tmp_path / "config.yaml").write_text("parallelism:\n  default: 9\n")
    monkeypatch.setenv("FLINTLOCK_CONF_DIR", str(tmp_path))
    assert StreamExecutionEnvironment.get_execution_environment().get_parallelism() == 9
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"parallelism.default": 2}))
    assert env.get_parallelism() == 2


def test_max_parallelism_derived_from_parallelism_or_configured() -> None:
    env = _env(100)
    env.from_source(FakeSource()).sink_to(FakeSink())
    assert env.get_job_graph().vertices[0].max_parallelism == 256
    env2 = _env(4).set_max_parallelism(16)
    env2.from_source(FakeSource()).sink_to(FakeSink())
    assert env2.get_job_graph().vertices[0].max_parallelism == 16


def test_max_parallelism_below_parallelism_is_an_error() -> None:
    env = _env(8).set_max_parallelism(4)
    env.from_source(FakeSource()).sink_to(FakeSink())
    with pytest.raises(InvalidProgramException, match="max parallelism 4"):
        env.get_job_graph()


def test_sink_runs_with_its_inputs_parallelism_unless_set() -> None:
    env = _env(4)
    src = env.from_source(FakeSource()).set_parallelism(2)
    src.sink_to(FakeSink("A"))
    src.sink_to(FakeSink("B")).set_parallelism(3)
    jg = env.get_job_graph()
    assert [(v.name, v.parallelism) for v in jg.vertices] == [
        ("Source: Fake: /data -> Sink: A", 2), ("Sink: B", 3)]
    assert jg.vertices[0].results[0].ship_strategy is REB


def test_column_lists_are_accepted_like_varargs() -> None:
    env = _env(2)
    env.from_source(FakeSource()).select(["a", "b"]).key_by(["a"]).count().sort(["a"]).print()
    jg = env.get_job_graph()
    select = _chain(jg.vertices[0]).nodes[1].spec
    assert len(select.columns) == 2 and jg.vertices[0].results[0].key_columns == ("a",)
    assert _chain(jg.vertices[2]).head().spec == SortSpec(("a",))
