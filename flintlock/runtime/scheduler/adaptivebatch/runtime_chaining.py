"""Runtime chaining: which consumers a vertex runs chained, once it runs one subtask (pure).

Flink chains operators when it builds the JobGraph, where the parallelism of a batch job's
vertices is not known yet. The AdaptiveBatchScheduler sizes most vertices that follow the
large inputs at parallelism 1 (TPC-H at SF 1: nearly every aggregate, join and sort after the
scans), and a vertex whose one consumer also runs one subtask still writes its rows as a result
partition that the consumer reads back in a Spark job of its own: 80-250 ms of fixed cost per
vertex on the profiling cluster. Flink 2.0 generates the JobGraph incrementally for such
run-time decisions (FLIP-469's ``AdaptiveGraphManager``); flintlock keeps the submitted
JobGraph and chains at run time instead (``ExecutionGraph.chain_consumer``): the consumer's
operators run in the producer's subtask (``TaskDeploymentDescriptor.chained_consumers``).

``chained_consumers`` decides, for a vertex about to be initialized at ``parallelism``, the
consumers to chain into it, in order (a chained consumer's own consumer may follow). A consumer
qualifies when all hold:

- the vertex (as chained so far) has exactly one output, BLOCKING, and the consumer is its only
  reader: the consumer has exactly one input and no source;
- the consumer runs one subtask whatever its producer stores: its parallelism is set to 1, or
  it is sized at run time through a GLOBAL, FORWARD or RESCALE edge from a one-subtask
  producer (a HASH or REBALANCE edge sizes it by bytes not yet produced, so it is left alone);
- it is in the same slot sharing group (the same slot and resources), and is not a probe side
  producer held for a join (``probe_joins``).

The vertex itself must run one subtask: with more, chaining would change what each subtask of
the consumer reads.
"""

from __future__ import annotations

from collections.abc import Collection

from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex
from flintlock.runtime.ids import JobVertexID
from flintlock.runtime.jobgraph.types import ShipStrategy

__all__ = ["chained_consumers"]

#: edges into a vertex sized at run time that give it one subtask behind a one-subtask producer
_ONE_FROM_ONE = (ShipStrategy.GLOBAL, ShipStrategy.FORWARD, ShipStrategy.RESCALE)


def chained_consumers(graph: ExecutionGraph, vertex: ExecutionJobVertex, parallelism: int,
                      held: Collection[JobVertexID] = ()) -> list[ExecutionJobVertex]:
    """The consumers to chain into ``vertex`` (not initialized yet, about to run at
    ``parallelism``), in chaining order; empty when none qualifies (see the module
    docstring). ``held``: probe side producers waiting for their join's other side."""
    if parallelism != 1 or vertex.initialized or vertex.chained_into is not None:
        return []
    chained: list[ExecutionJobVertex] = []
    outputs = list(vertex.job_vertex.results)
    while len(outputs) == 1 and outputs[0].result_type.is_blocking():
        consumer = graph.job_vertices[outputs[0].consumer]
        if not _chainable(graph, vertex, consumer, held):
            break
        chained.append(consumer)
        outputs = list(consumer.job_vertex.results)
    return chained


def _chainable(graph: ExecutionGraph, vertex: ExecutionJobVertex, consumer: ExecutionJobVertex,
               held: Collection[JobVertexID]) -> bool:
    jv = consumer.job_vertex
    if consumer.initialized or consumer.chained_into is not None or consumer.id in held:
        return False
    if jv.source is not None or len(jv.inputs) != 1:
        return False
    if jv.slot_sharing_group != vertex.job_vertex.slot_sharing_group:
        return False
    if consumer.id in graph.dynamic_vertices:
        return jv.inputs[0].ship_strategy in _ONE_FROM_ONE
    return jv.parallelism == 1
