"""The chain rewrites of a join moved into its probe side's producer (pure: no Spark)."""

from __future__ import annotations

import pytest

from flintlock.runtime.ids import IntermediateDataSetID, OperatorID
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.join_pushdown import (
    chain_join_to_output,
    duplicate_column_error,
    read_joined_probe,
)

TO_JOIN = IntermediateDataSetID(f"{10:032x}")
ELSEWHERE = IntermediateDataSetID(f"{11:032x}")


def _op(n: int) -> OperatorID:
    return OperatorID(f"{n:032x}")


def _probe_chain() -> S.OperatorChain:
    """Source -> Filter, whose Filter writes the join's input (HASH on l_k, two columns)."""
    return S.OperatorChain(
        nodes=(S.ChainedNode(_op(1), "Source: lineitem", S.SourceSpec(None), (), None),
               S.ChainedNode(_op(2), "Filter", S.FilterSpec("l_q > 1"), (), 0, (0,))),
        outputs=(S.OutputSpec(TO_JOIN, ShipStrategy.HASH, ("l_k",), 128, ("l_k", "l_v")),),
    )


def _join_chain(spec: object) -> S.OperatorChain:
    return S.OperatorChain(nodes=(
        S.ChainedNode(_op(7), "Join", spec, (0, 1), None),
        S.ChainedNode(_op(8), "Select", S.SelectSpec(("l_v",)), (), 0, (0,)),
    ))


def test_the_join_follows_the_output_node_with_the_exchange_columns_and_the_build_gate() -> None:
    join = S.JoinSpec("inner", ("l_k",), ("o_k",), probe="left")
    rewritten = chain_join_to_output(_probe_chain(), TO_JOIN, _join_chain(join), "left", 0, "v")
    source, filt, project, joined = rewritten.nodes
    assert source == _probe_chain().nodes[0]
    assert filt.outputs == ()  # the output moved to the join
    assert (project.spec, project.chained_input, project.gate_inputs) == (
        S.ConsumedColumnsSpec(("l_k", "l_v")), 1, ())
    assert joined.spec == S.JoinSpec("inner", ("l_k",), ("o_k",), broadcast="right")
    assert (joined.name, joined.operator_id, joined.chained_input, joined.gate_inputs,
            joined.outputs) == ("Join", _op(7), 2, (0,), (0,))
    # the joined rows cross the exchange whole, on the probe side's HASH keys
    assert rewritten.outputs == (S.OutputSpec(TO_JOIN, ShipStrategy.HASH, ("l_k",), 128, None),)


def test_a_right_probe_side_broadcasts_the_left_side() -> None:
    join = S.JoinSpec("right", ("o_k",), ("l_k",))
    joined = chain_join_to_output(_probe_chain(), TO_JOIN, _join_chain(join), "right", 3, "v").nodes[-1]
    assert (joined.spec.broadcast, joined.gate_inputs) == ("left", (3,))


@pytest.mark.parametrize(("how", "probe", "keys"), [
    ("semi", "right", (("o_k",), ("l_k",))),   # a semi join cannot broadcast its left side
    ("anti", "right", (("o_k",), ("l_k",))),
])
def test_a_side_that_the_join_cuts_to_matches_keeps_rows_with_the_other_sides_keys(
        how: str, probe: str, keys: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    spec = S.JoinSpec(how, *keys)
    rewritten = chain_join_to_output(_probe_chain(), TO_JOIN, _join_chain(spec), probe, 0, "v",
                                     reduce_only=True)
    joined = rewritten.nodes[-1]
    assert joined.spec == S.JoinSpec("semi", ("l_k",), ("o_k",), broadcast="right")
    assert (joined.gate_inputs, joined.outputs) == ((0,), (0,))
    assert rewritten.nodes[-2].spec == S.ConsumedColumnsSpec(("l_k", "l_v"))


@pytest.mark.parametrize(("how", "probe"), [
    ("anti", "left"), ("full", "left"), ("left", "left"),
    ("left", "right"),  # dropped unmatched, but the kept side's keys usually cover it: not cut
    ("inner", "left"),  # an inner join moves instead
])
def test_only_a_semi_or_anti_joins_right_side_is_cut(how: str, probe: str) -> None:
    with pytest.raises(OperatorException, match="run the") as info:
        chain_join_to_output(_probe_chain(), TO_JOIN, _join_chain(S.JoinSpec(how, ("k",), ("k",))),
                             probe, 0, "v", reduce_only=True)
    assert info.value.non_recoverable


@pytest.mark.parametrize(("how", "probe"), [
    ("left", "right"),   # a left join keeps the left side's unmatched rows: it cannot be built
    ("full", "left"),
    ("semi", "right"),
    ("cross", "left"),
])
def test_a_join_that_cannot_broadcast_the_other_side_is_a_non_recoverable_error(how: str, probe: str) -> None:
    with pytest.raises(OperatorException, match="run the .*broadcast join") as info:
        chain_join_to_output(_probe_chain(), TO_JOIN,
                             _join_chain(S.JoinSpec(how, ("k",), ("k",))), probe, 0, "v")
    assert info.value.non_recoverable


def test_an_output_the_chain_does_not_have_is_a_non_recoverable_error() -> None:
    with pytest.raises(OperatorException, match="does not have") as info:
        chain_join_to_output(_probe_chain(), ELSEWHERE,
                             _join_chain(S.JoinSpec("inner", ("k",), ("k",))), "left", 0, "v")
    assert info.value.non_recoverable


def test_the_join_vertex_reads_the_joined_probe_gate_only() -> None:
    chain = _join_chain(S.JoinSpec("inner", ("l_k",), ("o_k",)))
    for side, gate in (("left", 0), ("right", 1)):
        head, rest = read_joined_probe(chain, side, "Join -> Select").nodes
        assert (head.spec, head.gate_inputs, head.name) == (S.UnionSpec(), (gate,), "Join")
        assert rest == chain.nodes[1]
    with pytest.raises(OperatorException, match="already joined"):
        read_joined_probe(_probe_chain(), "left", "Source: lineitem -> Filter")


def test_a_duplicate_column_when_writing_the_joined_rows_is_explained_with_what_to_do() -> None:
    spark_error = RuntimeError("[COLUMN_ALREADY_EXISTS] The column `name` already exists.")
    error = duplicate_column_error(spark_error, "Join", "Source: lineitem")
    assert error is not None and error.non_recoverable and error.__cause__ is spark_error
    assert "have a column name in common" in str(error)
    assert "adaptive-broadcast-join.strategy: NONE" in str(error)
    assert "`name` already exists" in str(error)
    assert duplicate_column_error(RuntimeError("[DIVIDE_BY_ZERO]"), "Join", "v") is None
