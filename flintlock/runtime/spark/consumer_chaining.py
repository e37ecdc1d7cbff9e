"""Chain rewrite for a consumer vertex chained into its producer at run time (pure).

The AdaptiveBatchScheduler chains a consumer into its producer when both turn out to run one
subtask and the consumer reads only that producer (``scheduler.adaptivebatch.runtime_chaining``).
The producer's task then gets the consumer's chain (``TaskDeploymentDescriptor
.chained_consumers``) and runs it on the output it would have written for it, in the same Spark
plan: one Spark job and no partition written and read where there were two.

``chain_consumer`` appends the consumer's nodes to the producer's chain. The output the consumer
read is dropped; the node that fed it feeds a ``ConsumedColumnsSpec`` (the columns that exchange
carried, so the consumer sees what its gate would have read) and then the consumer's head as a
chained node. The consumer's outputs follow the producer's remaining outputs, in their order:
the JobMaster lists the task's produced partitions the same way
(``ExecutionGraph.output_datasets``).
"""

from __future__ import annotations

import dataclasses

from flintlock.runtime.ids import IntermediateDataSetID
from flintlock.runtime.operators import specs as S
from flintlock.runtime.spark.errors import OperatorException

__all__ = ["chain_consumer", "fed_output"]


def fed_output(chain: S.OperatorChain, dataset: IntermediateDataSetID,
               missing: str) -> tuple[int, int]:
    """(index into ``chain.outputs`` of the output to ``dataset``, index of the node that
    writes it).

    Raises:
        OperatorException: (non-recoverable, message ``missing``) the chain has no such output.
    """
    index = next((i for i, o in enumerate(chain.outputs) if o.dataset_id == dataset), None)
    feeding = next((n for n, node in enumerate(chain.nodes) if index in node.outputs), None)
    if index is None or feeding is None:
        raise OperatorException(missing, non_recoverable=True)
    return index, feeding


def chain_consumer(chain: S.OperatorChain, input_dataset: IntermediateDataSetID,
                   consumer: S.OperatorChain, consumer_name: str,
                   vertex_name: str) -> S.OperatorChain:
    """``chain`` with ``consumer`` (the chain of the vertex that reads output
    ``input_dataset`` through its only input gate) appended in place of that output.

    Raises:
        OperatorException: (non-recoverable) ``chain`` has no such output, or the consumer's
            head does not read exactly one input gate (a source or a join cannot be chained).
    """
    head = consumer.head()
    if head.gate_inputs != (0,) or isinstance(head.spec, (S.SourceSpec, S.JoinSpec)):
        raise OperatorException(
            f"vertex '{vertex_name}' was deployed to run '{consumer_name}' chained to its "
            f"output, but that vertex's head {head.name!r} ({type(head.spec).__name__}) does "
            "not read exactly one input", non_recoverable=True)
    index, feeding = fed_output(
        chain, input_dataset, f"vertex '{vertex_name}' was deployed to run '{consumer_name}' "
        f"chained to its output {input_dataset}, which its chain does not have")
    columns = chain.outputs[index].columns

    def kept(outs: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(o - 1 if o > index else o for o in outs if o != index)

    nodes = [dataclasses.replace(n, outputs=kept(n.outputs)) for n in chain.nodes]
    outputs = [o for i, o in enumerate(chain.outputs) if i != index]
    nodes.append(S.ChainedNode(head.operator_id, f"{head.name} (consumed columns)",
                               S.ConsumedColumnsSpec(columns), (), feeding, ()))
    base, shift = len(nodes), len(outputs)
    for k, node in enumerate(consumer.nodes):
        moved = tuple(o + shift for o in node.outputs)
        if k == 0:
            # the gate's rows are the columns node; a pass-through head (a union of one gate)
            # becomes the identity
            spec = S.ConsumedColumnsSpec(None) if isinstance(node.spec, S.UnionSpec) else node.spec
            nodes.append(dataclasses.replace(node, spec=spec, gate_inputs=(),
                                             chained_input=base - 1, outputs=moved))
        else:
            if node.gate_inputs:  # a chained broadcast join reads a gate the producer lacks
                raise OperatorException(
                    f"vertex '{vertex_name}' was deployed to run '{consumer_name}' chained to "
                    f"its output, but {node.name!r} of that vertex reads an input gate",
                    non_recoverable=True)
            assert node.chained_input is not None  # only a chain's head (k == 0) has none
            nodes.append(dataclasses.replace(node, chained_input=node.chained_input + base,
                                             outputs=moved))
    return S.OperatorChain(nodes=tuple(nodes), outputs=(*outputs, *consumer.outputs))
