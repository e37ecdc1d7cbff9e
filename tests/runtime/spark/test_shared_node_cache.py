"""Which shared operators a subtask caches (pure: no Spark)."""

from __future__ import annotations

from flintlock.runtime.ids import OperatorID
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.chain_translator import shared_nodes_to_cache


def _chain(*nodes: tuple[object, int | None]) -> S.OperatorChain:
    return S.OperatorChain(tuple(
        S.ChainedNode(OperatorID(f"{i:032x}"), f"op{i}", spec, (), parent)
        for i, (spec, parent) in enumerate(nodes)))


SRC = S.SourceSpec("src")
AGG = S.KeyedAggregateSpec(("k",), ())
FILTER = S.FilterSpec("x > 1")
SINK = S.SinkSpec("sink")


def test_an_aggregation_feeding_two_actions_is_cached_at_the_branch() -> None:
    # src -> agg -> filter -> (sink 3, output at 2 and sink 4)
    chain = _chain((SRC, None), (AGG, 0), (FILTER, 1), (SINK, 2), (SINK, 2))
    assert shared_nodes_to_cache(chain, [3, 4]) == [2]
    assert shared_nodes_to_cache(chain, [2, 3, 4]) == [2]


def test_a_cheap_scan_feeding_two_actions_is_recomputed() -> None:
    chain = _chain((SRC, None), (FILTER, 0), (SINK, 1), (SINK, 1))
    assert shared_nodes_to_cache(chain, [2, 3]) == []


def test_one_action_caches_nothing_and_each_branch_point_is_cached_once() -> None:
    chain = _chain((SRC, None), (AGG, 0), (SINK, 1), (FILTER, 1), (SINK, 3), (SINK, 3))
    assert shared_nodes_to_cache(chain, [2]) == []
    assert shared_nodes_to_cache(chain, [2, 4, 5]) == [1, 3]
