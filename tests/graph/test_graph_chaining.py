"""Flink's isChainable rules and chain construction on hand-built StreamGraphs."""

from __future__ import annotations

import pytest
from graph_builders import edge, graph, node, sink, source, union

from flintlock.graph.chaining import compute_chains, is_chainable, topological_order
from flintlock.graph.stream_graph import ChainingStrategy, default_max_parallelism
from flintlock.runtime.jobgraph.types import ShipStrategy

A, H, N = ChainingStrategy.ALWAYS, ChainingStrategy.HEAD, ChainingStrategy.NEVER


@pytest.mark.parametrize(
    ("up_kw", "down_kw", "part", "inputs", "enabled", "expected"),
    [
        ({}, {}, ShipStrategy.FORWARD, 1, True, True),
        ({}, {}, ShipStrategy.REBALANCE, 1, True, False),
        ({}, {}, ShipStrategy.HASH, 1, True, False),
        ({}, {}, ShipStrategy.RESCALE, 1, True, False),
        ({}, {}, ShipStrategy.BROADCAST, 1, True, False),
        ({}, {}, ShipStrategy.GLOBAL, 1, True, False),
        ({"p": 2}, {"p": 3}, ShipStrategy.FORWARD, 1, True, False),
        ({}, {}, ShipStrategy.FORWARD, 2, True, False),  # multiple inputs
        ({}, {}, ShipStrategy.FORWARD, 1, False, False),  # chaining disabled
        ({"ssg": "a"}, {"ssg": "b"}, ShipStrategy.FORWARD, 1, True, False),
        ({"ssg": "a"}, {"ssg": "a"}, ShipStrategy.FORWARD, 1, True, True),
        ({"cs": N}, {}, ShipStrategy.FORWARD, 1, True, False),  # up disable_chaining
        ({}, {"cs": N}, ShipStrategy.FORWARD, 1, True, False),  # down disable_chaining
        ({}, {"cs": H}, ShipStrategy.FORWARD, 1, True, False),  # down start_new_chain
        ({"cs": H}, {}, ShipStrategy.FORWARD, 1, True, True),  # up is a head: may chain on
        ({"maxp": 128}, {"maxp": 256}, ShipStrategy.FORWARD, 1, True, True),
    ],
)
def test_is_chainable(up_kw, down_kw, part, inputs, enabled, expected) -> None:
    up, down = node(1, **up_kw), node(2, **down_kw)
    assert is_chainable(up, down, edge(1, 2, part), down_inputs=inputs,
                        chaining_enabled=enabled) is expected


def test_linear_pipeline_with_a_rebalance_makes_two_chains() -> None:
    g = graph([source(1), node(2), node(3), sink(4)],
              [edge(1, 2), edge(2, 3, ShipStrategy.REBALANCE), edge(3, 4)])
    assert [(c.head, c.nodes) for c in compute_chains(g)] == [(1, (1, 2)), (3, (3, 4))]


def test_fan_out_chains_both_successors_into_one_tree() -> None:
    g = graph([source(1), node(2), node(3), sink(4), sink(5)],
              [edge(1, 2), edge(1, 3), edge(2, 4), edge(3, 5)])
    assert [(c.head, c.nodes) for c in compute_chains(g)] == [(1, (1, 2, 3, 4, 5))]


def test_multi_input_node_is_always_a_head() -> None:
    g = graph([source(1), source(2), union(3), sink(4)],
              [edge(1, 3, type_number=0), edge(2, 3, type_number=1), edge(3, 4)])
    chains = compute_chains(g)
    assert [(c.head, c.nodes) for c in chains] == [(1, (1,)), (2, (2,)), (3, (3, 4))]


def test_chaining_disabled_makes_one_chain_per_node() -> None:
    g = graph([source(1), node(2), sink(3)], [edge(1, 2), edge(2, 3)], chaining=False)
    assert [c.nodes for c in compute_chains(g)] == [(1,), (2,), (3,)]


def test_chains_are_in_topological_order_of_heads() -> None:
    # node 5 (a head) is fed by node 4, which sits in the chain headed by 3: 3's chain first
    g = graph([source(1), source(3), node(4), union(5), sink(6)],
              [edge(3, 4), edge(1, 5, type_number=0), edge(4, 5, type_number=1), edge(5, 6)])
    heads = [c.head for c in compute_chains(g)]
    assert heads.index(3) < heads.index(5) and heads.index(1) < heads.index(5)


def test_topological_order_rejects_cycles() -> None:
    g = graph([node(1), node(2)], [edge(1, 2), edge(2, 1)])
    with pytest.raises(ValueError, match="cycle"):
        topological_order(g)


def test_topological_order_puts_producers_first() -> None:
    g = graph([source(1), node(2), node(3)], [edge(1, 3), edge(3, 2)])
    assert topological_order(g) == (1, 3, 2)


@pytest.mark.parametrize(
    ("p", "expected"),
    [(1, 128), (85, 128), (86, 256), (128, 256), (200, 512), (1000, 2048), (20000, 32768),
     (40000, 32768)],
)
def test_default_max_parallelism(p: int, expected: int) -> None:
    assert default_max_parallelism(p) == expected


@pytest.mark.parametrize(
    "module",
    ["flintlock.graph.stream_graph_generator", "flintlock.graph", "flintlock.api.environment",
     "flintlock.api.transformations"],
)
def test_compiler_modules_import_on_their_own_without_pyspark(module: str) -> None:
    import subprocess
    import sys

    code = f"import sys, {module}; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _bjoin(nid: int, side: str = "right", how: str = "inner"):
    from flintlock.runtime.operators.specs import JoinSpec

    return node(nid, JoinSpec(how, ("k",), ("k",), side))


BC, HASH, FWD = ShipStrategy.BROADCAST, ShipStrategy.HASH, ShipStrategy.FORWARD


def test_broadcast_join_chains_to_its_probe_side_and_comes_after_the_broadcast_producer() -> None:
    # probe source 1 -> filter 2 -> join 4 (chained); source 3 broadcast into join 4
    g = graph([source(1), node(2), source(3), _bjoin(4), sink(5)],
              [edge(1, 2), edge(2, 4, FWD, type_number=0), edge(3, 4, BC, type_number=1),
               edge(4, 5)])
    assert [(c.head, c.nodes) for c in compute_chains(g)] == [(3, (3,)), (1, (1, 2, 4, 5))]


@pytest.mark.parametrize(("side", "probe", "build"), [
    ("right", FWD, HASH),        # the build side is not broadcast
    ("", FWD, BC),               # a hash join
    ("left", FWD, BC),           # the BROADCAST edge is not the declared build side
])
def test_join_stays_a_head_unless_its_build_side_is_broadcast(side: str, probe, build) -> None:
    g = graph([source(1), source(3), _bjoin(4, side), sink(5)],
              [edge(1, 4, probe, type_number=0), edge(3, 4, build, type_number=1), edge(4, 5)])
    assert [(c.head, c.nodes) for c in compute_chains(g)] == [(1, (1,)), (3, (3,)), (4, (4, 5))]


def test_broadcast_join_whose_chain_would_depend_on_itself_stays_a_head() -> None:
    # 1 -> 2 (HASH) -> broadcast into 4; 1 -> 4 probe: chaining 4 to 1 would make 1's vertex wait
    # for 2's, which waits for 1's
    g = graph([source(1), node(2), _bjoin(4), sink(5)],
              [edge(1, 2, HASH), edge(1, 4, FWD, type_number=0), edge(2, 4, BC, type_number=1),
               edge(4, 5)])
    assert [(c.head, c.nodes) for c in compute_chains(g)] == [(1, (1,)), (2, (2,)), (4, (4, 5))]
