"""The adaptive broadcast join's chain rewrite in the task (pure: no Spark)."""

from __future__ import annotations

import pytest

from flintlock.runtime.ids import OperatorID
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.chain_translator import broadcast_head_join
from flintlock.runtime.spark.errors import OperatorException


def _chain(head: object) -> S.OperatorChain:
    return S.OperatorChain((
        S.ChainedNode(OperatorID(f"{1:032x}"), "Join", head, (0, 1), None),
        S.ChainedNode(OperatorID(f"{2:032x}"), "Filter", S.FilterSpec("x > 1"), (), 0, (0,)),
    ))


def test_the_head_hash_join_becomes_a_broadcast_join_of_the_side_and_the_rest_is_kept() -> None:
    chain = _chain(S.JoinSpec("left", ("k",), ("k",)))
    rewritten = broadcast_head_join(chain, "right", "Join -> Filter")
    assert rewritten.nodes[0].spec == S.JoinSpec("left", ("k",), ("k",), broadcast="right")
    assert rewritten.nodes[0].gate_inputs == (0, 1)
    assert rewritten.nodes[1:] == chain.nodes[1:]


@pytest.mark.parametrize(("head", "side"), [
    (S.JoinSpec("left", ("k",), ("k",)), "left"),      # a left join keeps its left rows
    (S.JoinSpec("full", ("k",), ("k",)), "right"),
    (S.JoinSpec("inner", ("k",), ("k",), broadcast="left"), "right"),  # compiled broadcast
    (S.UnionSpec(), "right"),
])
def test_a_head_that_cannot_broadcast_the_side_is_a_non_recoverable_error(head, side) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OperatorException, match="deployed to broadcast") as info:
        broadcast_head_join(_chain(head), side, "v")
    assert info.value.non_recoverable
