"""StreamGraph -> JobGraph: vertices, datasets, gates and the operator chain payload."""

from __future__ import annotations

import json

import cloudpickle
import pytest
from graph_builders import edge, graph, node, sink, source, union

from flintlock.graph.job_graph_generator import SPARK_STREAM_TASK, create_job_graph
from flintlock.graph.plan import stream_graph_plan, stream_graph_plan_json
from flintlock.runtime.ids import JobID
from flintlock.runtime.jobgraph.types import ResultPartitionType, ShipStrategy
from flintlock.runtime.operators.specs import OperatorChain, SinkSpec, SourceSpec

HASH, REB = ShipStrategy.HASH, ShipStrategy.REBALANCE


def _chain(v) -> OperatorChain:
    return cloudpickle.loads(v.invokable_payload)


def test_source_filter_hash_agg_sink() -> None:
    g = graph(
        [source(1, name="Source: S"), node(2, name="Filter"), node(3, name="Agg", p=3, maxp=64),
         sink(4, name="Sink: K", p=3, maxp=64)],
        [edge(1, 2), edge(2, 3, HASH, ("k",)), edge(3, 4)],
    )
    jg = create_job_graph(g, job_id=JobID("0" * 32))
    assert [v.name for v in jg.vertices] == ["Source: S -> Filter", "Agg -> Sink: K"]
    first, second = jg.vertices
    assert first.id.hex == g.node(1).operator_id.hex  # vertex id = head operator id
    assert first.source == "src1" and first.sinks == ()
    assert second.sinks == ("sink4",) and second.source is None
    assert first.invokable_class == SPARK_STREAM_TASK
    assert first.operator_names == ("Source: S", "Filter")
    (ds,) = first.results
    assert ds.result_type is ResultPartitionType.BLOCKING
    assert (ds.consumer, ds.ship_strategy, ds.key_columns) == (second.id, HASH, ("k",))
    (je,) = second.inputs
    assert (je.source, je.type_number, je.ship_strategy) == (ds.id, 0, HASH)

    c1 = _chain(first)
    assert [n.name for n in c1.nodes] == ["Source: S", "Filter"]
    assert isinstance(c1.head().spec, SourceSpec) and c1.head().gate_inputs == ()
    assert c1.nodes[1].chained_input == 0 and c1.nodes[1].outputs == (0,)
    (out,) = c1.outputs
    # HASH output uses the consumer's max parallelism as the number of key groups
    assert (out.dataset_id, out.key_columns, out.max_parallelism) == (ds.id, ("k",), 64)
    c2 = _chain(second)
    assert c2.head().gate_inputs == (0,) and isinstance(c2.nodes[1].spec, SinkSpec)


def test_union_gates_follow_type_numbers() -> None:
    g = graph([source(1), source(2), source(3), union(4), sink(5)],
              [edge(3, 4, type_number=2), edge(1, 4, type_number=0), edge(2, 4, type_number=1),
               edge(4, 5)])
    jg = create_job_graph(g)
    by_head = {v.operator_ids[0]: v for v in jg.vertices}
    u = jg.vertices[-1]
    producers = [jg.dataset(e.source).producer for e in u.inputs]
    assert [e.type_number for e in u.inputs] == [0, 1, 2]
    assert producers == [by_head[g.node(i).operator_id].id for i in (1, 2, 3)]
    assert _chain(u).head().gate_inputs == (0, 1, 2)


def test_same_source_twice_into_a_union_makes_two_datasets() -> None:
    g = graph([source(1), union(2), sink(3)],
              [edge(1, 2, type_number=0), edge(1, 2, type_number=1), edge(2, 3)])
    jg = create_job_graph(g)
    src = jg.vertices[0]
    assert len(src.results) == 2 and len({d.id for d in src.results}) == 2
    assert _chain(src).head().outputs == (0, 1)


def test_fan_out_non_chained_edges_get_one_output_each() -> None:
    g = graph([source(1), node(2, p=4), node(3), sink(4, p=4), sink(5)],
              [edge(1, 2, REB), edge(1, 3), edge(2, 4), edge(3, 5)])
    jg = create_job_graph(g)
    head = jg.vertices[0]
    assert head.name == "op1 -> op3 -> op5"
    chain = _chain(head)
    assert chain.head().outputs == (0,) and chain.outputs[0].ship_strategy is REB
    assert [n.chained_input for n in chain.nodes] == [None, 0, 1]


def test_vertices_are_topological_and_validated_by_the_job_graph() -> None:
    g = graph([source(1), source(2), node(3), union(4), sink(5)],
              [edge(2, 3, REB), edge(1, 4, type_number=0), edge(3, 4, type_number=1), edge(4, 5)])
    jg = create_job_graph(g)  # JobGraph.__post_init__ rejects non-topological orders
    seen = set()
    for v in jg.vertices:
        for e in v.inputs:
            assert jg.dataset(e.source).producer in seen
        seen.add(v.id)


def test_job_graph_plan_shape() -> None:
    g = graph([source(1, name="Source: S"), node(2, name="Agg"), sink(3, name="Sink: K")],
              [edge(1, 2, HASH, ("k",)), edge(2, 3)])
    jg = create_job_graph(g, job_id=JobID("a" * 32))
    plan = json.loads(json.dumps(jg.plan))
    assert plan["jid"] == "a" * 32 and plan["type"] == "BATCH" and plan["name"] == "test"
    first, second = plan["nodes"]
    assert set(first) == {"id", "parallelism", "operator", "operator_strategy", "description",
                          "optimizer_properties"}
    # Flink 2.x's JsonPlanGenerator: no operator name; the HTML-escaped vertex name describes it
    assert (first["operator"], first["operator_strategy"]) == ("", "")
    assert second["description"] == "Agg -&gt; Sink: K"
    assert second["inputs"] == [
        {"num": 0, "id": first["id"], "ship_strategy": "HASH", "exchange": "blocking"}]


def test_stream_graph_plan_shape() -> None:
    g = graph([source(1, name="Source: S"), node(2, name="Filter", p=3), sink(3, p=3)],
              [edge(1, 2, REB), edge(2, 3)])
    plan = json.loads(stream_graph_plan_json(g))
    assert plan == stream_graph_plan(g)
    assert plan["nodes"][0] == {"id": 1, "type": "Source: S", "pact": "Data Source",
                                "contents": "Source: S", "parallelism": 2}
    assert plan["nodes"][1]["pact"] == "Operator"
    assert plan["nodes"][1]["predecessors"] == [{"id": 1, "ship_strategy": "REBALANCE",
                                                 "side": "second"}]
    assert plan["nodes"][2]["pact"] == "Data Sink"


def test_max_parallelism_below_parallelism_is_rejected_by_the_vertex() -> None:
    g = graph([source(1, p=4, maxp=2)], [])
    with pytest.raises(ValueError, match="max parallelism"):
        create_job_graph(g)
