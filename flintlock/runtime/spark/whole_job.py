"""One task running a whole BATCH job: every vertex's chain on its producers' DataFrames.

When every vertex of a job runs one subtask, the AdaptiveBatchScheduler chains them all into the
first source (``scheduler.adaptivebatch.whole_job_chaining``); that task's descriptor lists the
others as ``ChainedConsumer``s with the dataset each of their input gates reads
(``TaskDeploymentDescriptor.whole_job``). ``translate_whole_job`` translates the task's own
chain and then each chained vertex's, in order, serving a gate that reads another vertex's
output with that output's DataFrame (``consumed_only``: the columns the exchange would have
carried) instead of a partition read. Nothing is written between vertices: each sink (and any
output read outside the job's chained vertices) is one Spark action over a plan that spans the
vertices it depends on, which Spark optimizes as one query (its own shuffles, adaptive query
execution, exchange reuse).

The result is one ``OperatorChain`` and its ``TranslatedChain``, the vertices' nodes one after
the other, so the task writes outputs and sinks, caches shared nodes and explains failures as
for any chain. Sinks are numbered in the same order (the task's own, then each chained
vertex's: ``ExecutionJobVertex.sinks``); outputs read by a chained vertex are left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from flintlock.runtime.deployment import ChainedConsumer
from flintlock.runtime.ids import IntermediateDataSetID
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.chain_translator import TranslatedChain, translate_chain
from flintlock.runtime.spark.errors import OperatorException
from flintlock.runtime.spark.partitions import GateRead, consumed_only

__all__ = ["translate_whole_job"]


def translate_whole_job(
    spark: Any,
    chain: S.OperatorChain,
    members: Sequence[tuple[ChainedConsumer, S.OperatorChain]],
    *,
    vertex_name: str,
    source_splits: tuple[Any, ...],
    read_gate: Callable[[int], GateRead],
) -> tuple[S.OperatorChain, TranslatedChain]:
    """The task's ``chain`` and its chained vertices' chains (``members``, in chaining order,
    each with its descriptor), translated as one chain (see the module docstring).

    Args:
        read_gate: this task's own input gates (the task's chain only; chained vertices read
            only outputs of vertices before them).

    Raises:
        OperatorException: (non-recoverable) a chained vertex reads a dataset no vertex before
            it produces; or any error of ``translate_chain``.
    """
    parts: list[tuple[S.OperatorChain, TranslatedChain]] = []
    frames: dict[IntermediateDataSetID, Any] = {}
    read = {ds for member, _ in members for ds in member.input_datasets}

    def add(part: S.OperatorChain, tc: TranslatedChain) -> None:
        parts.append((part, tc))
        for out_index, node_index in tc.outputs:
            output = part.outputs[out_index]
            if output.dataset_id in read:
                frames[output.dataset_id] = consumed_only(tc.frames[node_index], output.columns)

    add(chain, translate_chain(spark, chain, vertex_name=vertex_name,
                               source_splits=source_splits, read_gate=read_gate))
    for member, member_chain in members:
        def gate(index: int, member: ChainedConsumer = member) -> GateRead:
            datasets = member.input_datasets
            if index >= len(datasets) or datasets[index] not in frames:
                raise OperatorException(
                    f"vertex '{vertex_name}' runs '{member.consumer_name}' as part of its whole "
                    f"job, but that vertex's input gate {index} reads no output of a vertex "
                    "before it", non_recoverable=True)
            return GateRead(frames[datasets[index]], 0, 0)

        add(member_chain, translate_chain(spark, member_chain, vertex_name=member.consumer_name,
                                          source_splits=member.source_splits, read_gate=gate))
    return _combined(parts, read)


def _combined(parts: Sequence[tuple[S.OperatorChain, TranslatedChain]],
              internal: set[IntermediateDataSetID]) -> tuple[S.OperatorChain, TranslatedChain]:
    """One chain of all parts' nodes (wiring shifted, outputs read inside the job dropped) and
    its translation."""
    nodes: list[S.ChainedNode] = []
    outputs: list[S.OutputSpec] = []
    combined = TranslatedChain()
    for part, tc in parts:
        base = len(nodes)
        kept: dict[int, int] = {}
        for out_index, output in enumerate(part.outputs):
            if output.dataset_id not in internal:
                kept[out_index] = len(outputs)
                outputs.append(output)
        for node in part.nodes:
            nodes.append(dataclasses.replace(
                node, chained_input=None if node.chained_input is None else node.chained_input + base,
                outputs=tuple(kept[o] for o in node.outputs if o in kept)))
        combined.frames.extend(tc.frames)
        combined.outputs.extend((kept[o], n + base) for o, n in tc.outputs if o in kept)
        offset = len(combined.sinks)
        combined.sinks.extend((offset + k, n + base, sink) for k, n, sink in tc.sinks)
        combined.records_in += tc.records_in
        combined.bytes_in += tc.bytes_in
    return S.OperatorChain(nodes=tuple(nodes), outputs=tuple(outputs)), combined
