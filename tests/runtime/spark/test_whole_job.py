"""A whole job translated as one chain (``runtime/spark/whole_job.py``); pure: the chains'
translation is replaced by one that names each node's DataFrame after what it reads."""

from __future__ import annotations

from typing import Any

import pytest

from flintlock.runtime.deployment import ChainedConsumer
from flintlock.runtime.ids import IntermediateDataSetID, OperatorID
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark import whole_job
from flintlock.runtime.spark.chain_translator import TranslatedChain
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.partitions import GateRead

ORDERS, CUSTOMER, JOINED, OUTSIDE = (IntermediateDataSetID(f"{n:032x}") for n in (1, 2, 3, 4))


def _op(n: int) -> OperatorID:
    return OperatorID(f"{n:032x}")


def _source(name: str, out: IntermediateDataSetID, columns: tuple[str, ...]) -> S.OperatorChain:
    return S.OperatorChain(
        nodes=(S.ChainedNode(_op(1), f"Source: {name}", S.SourceSpec(None), (), None, (0,)),),
        outputs=(S.OutputSpec(out, ShipStrategy.HASH, ("k",), 128, columns),))


def _join() -> S.OperatorChain:
    """Join (gates 0 and 1) -> Sink, whose Join also writes an output read outside the job."""
    return S.OperatorChain(
        nodes=(S.ChainedNode(_op(2), "Join", S.JoinSpec("inner", ("k",), ("k",)), (0, 1), None,
                             (0,)),
               S.ChainedNode(_op(3), "Sink: Collect", S.SinkSpec("collect"), (), 0)),
        outputs=(S.OutputSpec(OUTSIDE, ShipStrategy.FORWARD),))


def _fake_translate(spark: Any, chain: S.OperatorChain, *, vertex_name: str,
                    source_splits: Any, read_gate: Any) -> TranslatedChain:
    tc = TranslatedChain()
    for i, node in enumerate(chain.nodes):
        if node.gate_inputs:
            frame = f"{node.name}({', '.join(read_gate(g).df for g in node.gate_inputs)})"
        elif node.chained_input is None:
            frame = f"{node.name}{list(source_splits)}"
            tc.records_in += 10
        else:
            frame = f"{node.name}({tc.frames[node.chained_input]})"
        tc.frames.append(frame)
        tc.outputs.extend((o, i) for o in node.outputs)
        if isinstance(node.spec, S.SinkSpec):
            tc.sinks.append((0, i, node.spec))
    return tc


@pytest.fixture(autouse=True)
def fake_translation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(whole_job, "translate_chain", _fake_translate)
    monkeypatch.setattr(whole_job, "consumed_only", lambda df, columns: f"{df}{list(columns or ())}")


def _run(join: ChainedConsumer) -> tuple[S.OperatorChain, TranslatedChain]:
    customer = ChainedConsumer("Source: customer", b"", (), ("c-1",))
    return whole_job.translate_whole_job(
        None, _source("orders", ORDERS, ("k", "o")),
        [(customer, _source("customer", CUSTOMER, ("k", "c"))), (join, _join())],
        vertex_name="Source: orders", source_splits=("o-1",),
        read_gate=lambda i: GateRead("partition", 0, 0))


def test_each_vertex_reads_its_producers_outputs_as_dataframes() -> None:
    chain, tc = _run(ChainedConsumer("Join", b"", (ORDERS, CUSTOMER)))
    assert tc.frames == [
        "Source: orders['o-1']", "Source: customer['c-1']",
        "Join(Source: orders['o-1']['k', 'o'], Source: customer['c-1']['k', 'c'])",
        "Sink: Collect(Join(Source: orders['o-1']['k', 'o'], Source: customer['c-1']['k', 'c']))"]
    # the outputs read inside the job are gone; the one read outside stays, renumbered
    assert [o.dataset_id for o in chain.outputs] == [OUTSIDE]
    assert tc.outputs == [(0, 2)]
    assert [n.outputs for n in chain.nodes] == [(), (), (0,), ()]
    assert [n.chained_input for n in chain.nodes] == [None, None, None, 2]
    assert [(k, n) for k, n, _ in tc.sinks] == [(0, 3)]
    assert tc.records_in == 20


def test_a_gate_that_reads_no_earlier_vertex_is_a_clear_error() -> None:
    with pytest.raises(OperatorException, match="'Join' .* input gate 1 reads no output") as err:
        _run(ChainedConsumer("Join", b"", (ORDERS,)))
    assert err.value.non_recoverable
