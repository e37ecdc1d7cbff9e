"""The chain rewrite of a consumer vertex chained into its producer at run time (pure: no Spark)."""

from __future__ import annotations

import pytest

from flintlock.runtime.ids import IntermediateDataSetID, OperatorID
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.consumer_chaining import chain_consumer
from flintlock.runtime.spark.errors import OperatorException

TO_MERGE = IntermediateDataSetID(f"{10:032x}")
SIDE = IntermediateDataSetID(f"{11:032x}")
MERGED = IntermediateDataSetID(f"{12:032x}")


def _op(n: int) -> OperatorID:
    return OperatorID(f"{n:032x}")


def _producer() -> S.OperatorChain:
    """Join -> LocalAggregate, whose Join also writes a side output (output 0) and whose
    LocalAggregate writes the merge's input (output 1, two columns)."""
    return S.OperatorChain(
        nodes=(S.ChainedNode(_op(1), "Join", S.JoinSpec("inner", ("k",), ("k",)), (0, 1), None, (0,)),
               S.ChainedNode(_op(2), "LocalAggregate", S.LocalAggregateSpec(("k",), ("s",)), (), 0, (1,))),
        outputs=(S.OutputSpec(SIDE, ShipStrategy.HASH, ("k",)),
                 S.OutputSpec(TO_MERGE, ShipStrategy.GLOBAL, (), 128, ("k", "s"))),
    )


def _consumer(head: object = None) -> S.OperatorChain:
    """GlobalAggregate -> Sort -> Sink, whose Sort also writes an output of its own."""
    return S.OperatorChain(
        nodes=(S.ChainedNode(_op(7), "GlobalAggregate", head or S.MergeAggregateSpec((), ("s",)),
                             (0,), None),
               S.ChainedNode(_op(8), "Sort", S.SortSpec(("s",)), (), 0, (0,)),
               S.ChainedNode(_op(9), "Sink: Collect", S.SinkSpec("collect"), (), 1)),
        outputs=(S.OutputSpec(MERGED, ShipStrategy.FORWARD),),
    )


def test_the_consumer_follows_the_node_that_fed_its_exchange() -> None:
    chain = chain_consumer(_producer(), TO_MERGE, _consumer(), "GlobalAggregate", "v")
    join, local, columns, merge, sort, sink = chain.nodes
    assert join == _producer().nodes[0]  # its other output stays, at the same index
    assert local.outputs == ()  # the exchange to the consumer is gone
    assert (columns.spec, columns.chained_input, columns.gate_inputs) == (
        S.ConsumedColumnsSpec(("k", "s")), 1, ())
    assert (merge.spec, merge.chained_input, merge.gate_inputs, merge.operator_id) == (
        S.MergeAggregateSpec((), ("s",)), 2, (), _op(7))
    assert (sort.chained_input, sort.outputs) == (3, (1,))  # after the producer's remaining one
    assert (sink.chained_input, sink.spec) == (4, S.SinkSpec("collect"))
    assert [o.dataset_id for o in chain.outputs] == [SIDE, MERGED]


def test_the_dropped_output_shifts_the_later_ones() -> None:
    producer = S.OperatorChain(
        nodes=(S.ChainedNode(_op(1), "Source: s", S.SourceSpec(None), (), None, (0, 1)),),
        outputs=(S.OutputSpec(TO_MERGE, ShipStrategy.GLOBAL), S.OutputSpec(SIDE, ShipStrategy.HASH)),
    )
    chain = chain_consumer(producer, TO_MERGE, _consumer(S.UnionSpec()), "Union", "v")
    assert chain.nodes[0].outputs == (0,)
    assert [o.dataset_id for o in chain.outputs] == [SIDE, MERGED]
    # a pass-through head (a union of its one gate) becomes the identity
    assert chain.nodes[2].spec == S.ConsumedColumnsSpec(None)
    assert chain.nodes[1].spec == S.ConsumedColumnsSpec(None)  # the exchange carried all columns


@pytest.mark.parametrize(("consumer", "dataset", "message"), [
    (S.OperatorChain(nodes=(S.ChainedNode(_op(7), "Join", S.JoinSpec("inner", ("k",), ("k",)),
                                          (0, 1), None),)),
     TO_MERGE, "does not read exactly one input"),
    (S.OperatorChain(nodes=(S.ChainedNode(_op(7), "Source: x", S.SourceSpec(None), (), None),)),
     TO_MERGE, "does not read exactly one input"),
    (None, IntermediateDataSetID(f"{99:032x}"), "which its chain does not have"),
])
def test_what_cannot_be_chained_fails_the_task_for_good(consumer: S.OperatorChain | None,
                                                        dataset: IntermediateDataSetID,
                                                        message: str) -> None:
    with pytest.raises(OperatorException, match=message) as info:
        chain_consumer(_producer(), dataset, consumer or _consumer(), "c", "v")
    assert info.value.non_recoverable
