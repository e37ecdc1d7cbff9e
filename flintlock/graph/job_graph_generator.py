"""StreamGraph -> JobGraph: chain operators into JobVertices and connect them by datasets.

Shapes:
- One JobVertex per ``Chain`` (``chaining.compute_chains``), in topological order. Its id is the
  head operator's id (as in Flink, where a vertex's id is its head's hash).
- Every non-chained StreamEdge becomes one IntermediateDataSet (produced by the vertex holding the
  edge's source node) and one JobEdge of the target vertex; the target's input gates are its head's
  in-edges ordered by ``type_number`` (gate 0 = join left, 1 = join right), then the broadcast
  side of each chained broadcast join, in chain order.
- The vertex's ``invokable_payload`` is ``cloudpickle.dumps(OperatorChain)``: node 0 the head, each
  other node wired to the chained node that feeds it, ``outputs`` in dataset order.
- STREAMING: every dataset is PIPELINED_BOUNDED and vertices run ``SPARK_STREAMING_TASK``.
- BATCH: every dataset is BLOCKING. HASH outputs use the consumer vertex's max parallelism as the
  number of key groups (Flink configures ``KeyGroupStreamPartitioner`` with the downstream's).

Follows Flink ``StreamingJobGraphGenerator.createJobGraph`` (fact sheet sections 2-3).
"""

from __future__ import annotations

from collections.abc import Mapping

import cloudpickle

from flintlock.graph.chaining import Chain, chained_in_edges, compute_chains
from flintlock.graph.column_pruning import Columns, consumed_columns, lower_names
from flintlock.graph.plan import job_graph_plan
from flintlock.graph.stream_graph import StreamEdge, StreamGraph
from flintlock.runtime.ids import IntermediateDataSetID, JobID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import JobType, ResultPartitionType, ShipStrategy
from flintlock.runtime.operators.specs import (
    ChainedNode,
    JoinSpec,
    OperatorChain,
    OutputSpec,
    SinkSpec,
    SourceSpec,
)
from flintlock.runtime.operators.time_specs import state_kind

__all__ = ["SPARK_STREAMING_TASK", "SPARK_STREAM_TASK", "create_job_graph", "result_partition_type"]

#: The invokable that runs an ``OperatorChain`` on Spark (``flintlock.runtime.spark``).
SPARK_STREAM_TASK = "flintlock.runtime.spark.stream_task:SparkStreamTask"
#: The invokable of STREAMING jobs: the chain once per epoch over PIPELINED inputs.
SPARK_STREAMING_TASK = "flintlock.runtime.spark.streaming_task:SparkStreamingTask"


def result_partition_type(job_type: JobType) -> ResultPartitionType:
    """BLOCKING for BATCH jobs, PIPELINED_BOUNDED for STREAMING jobs (fact sheet 2.2)."""
    if job_type is JobType.BATCH:
        return ResultPartitionType.BLOCKING
    return ResultPartitionType.PIPELINED_BOUNDED


def _edge_key(e: StreamEdge) -> tuple[int, int, int]:
    return (e.source_id, e.target_id, e.type_number)


def create_job_graph(
    graph: StreamGraph,
    *,
    job_id: JobID | None = None,
    invokable_class: str = SPARK_STREAM_TASK,
) -> JobGraph:
    """Compile ``graph`` into a JobGraph.

    Args:
        graph: the StreamGraph (from ``stream_graph_generator.generate_stream_graph``).
        job_id: the job's id; a new one when None.
        invokable_class: ``"module:Class"`` of every vertex's invokable (the Spark task of the
            job's runtime mode by default).

    Returns:
        The JobGraph with vertices in topological order and ``plan`` set.
    """
    job_id = job_id or JobID.generate()
    if graph.job_type is JobType.STREAMING and invokable_class == SPARK_STREAM_TASK:
        invokable_class = SPARK_STREAMING_TASK
    chains = compute_chains(graph)
    vertex_of_node: dict[int, Chain] = {nid: c for c in chains for nid in c.nodes}
    vertex_ids = {c.head: JobVertexID(graph.node(c.head).operator_id.hex) for c in chains}
    max_par = {c.head: graph.node(c.head).max_parallelism for c in chains}
    result_type = result_partition_type(graph.job_type)

    # every non-chained edge -> one dataset, produced in chain order
    via = chained_in_edges(graph)
    chained = {_edge_key(e) for e in via.values()}
    dataset_of: dict[tuple[int, int, int], IntermediateDataSetID] = {}
    for c in chains:
        for nid in c.nodes:
            for e in graph.out_edges(nid):
                if _edge_key(e) not in chained:
                    dataset_of[_edge_key(e)] = IntermediateDataSetID.generate()

    vertices: list[JobVertex] = []
    consumed = consumed_columns(graph)
    for c in chains:
        vertices.append(
            _build_vertex(graph, c, vertex_ids, vertex_of_node, max_par, via, dataset_of,
                          result_type, invokable_class, consumed)
        )
    name = graph.job_name
    return JobGraph(
        job_id=job_id,
        name=name,
        job_type=graph.job_type,
        vertices=tuple(vertices),
        configuration=dict(graph.configuration),
        slot_sharing_group_resources=dict(graph.slot_sharing_group_resources),
        plan=job_graph_plan(job_id, name, graph.job_type, vertices),
    )


def _build_vertex(
    graph: StreamGraph,
    chain: Chain,
    vertex_ids: Mapping[int, JobVertexID],
    vertex_of_node: Mapping[int, Chain],
    max_par: Mapping[int, int],
    via: Mapping[int, StreamEdge],
    dataset_of: Mapping[tuple[int, int, int], IntermediateDataSetID],
    result_type: ResultPartitionType,
    invokable_class: str,
    consumed: Mapping[tuple[int, int, int], Columns],
) -> JobVertex:
    chained = {_edge_key(e) for e in via.values()}
    head = graph.node(chain.head)
    vid = vertex_ids[chain.head]
    index = {nid: i for i, nid in enumerate(chain.nodes)}

    outputs: list[OutputSpec] = []
    results: list[IntermediateDataSet] = []
    node_outputs: dict[int, list[int]] = {nid: [] for nid in chain.nodes}
    for nid in chain.nodes:
        for e in graph.out_edges(nid):
            if _edge_key(e) in chained:
                continue
            consumer = vertex_of_node[e.target_id].head
            ds_id = dataset_of[_edge_key(e)]
            node_outputs[nid].append(len(outputs))
            columns = consumed.get(_edge_key(e))
            outputs.append(OutputSpec(
                ds_id, e.partitioner, e.key_columns, max_par[consumer],
                None if columns is None else tuple(sorted(columns | lower_names(e.key_columns)))))
            results.append(
                IntermediateDataSet(ds_id, vid, result_type, vertex_ids[consumer], e.partitioner,
                                    e.key_columns)
            )

    # input gates: the non-chained in-edges of the head, then of chained broadcast joins
    gate_edges: list[StreamEdge] = []
    gates_of: dict[int, tuple[int, ...]] = {}
    for nid in chain.nodes:
        network = [e for e in graph.in_edges(nid) if _edge_key(e) not in chained]
        gates_of[nid] = tuple(range(len(gate_edges), len(gate_edges) + len(network)))
        gate_edges.extend(network)
    inputs = tuple(
        JobEdge(dataset_of[_edge_key(e)], vid, e.partitioner, type_number=gate)
        for gate, e in enumerate(gate_edges)
    )

    nodes: list[ChainedNode] = []
    for nid in chain.nodes:
        node = graph.node(nid)
        gate_inputs = gates_of[nid]
        chained_input = None if nid == chain.head else index[via[nid].source_id]
        nodes.append(
            ChainedNode(node.operator_id, node.name, node.spec, gate_inputs, chained_input,
                        tuple(node_outputs[nid]))
        )
    op_chain = OperatorChain(nodes=tuple(nodes), outputs=tuple(outputs))
    names = tuple(graph.node(nid).name for nid in chain.nodes)
    return JobVertex(
        id=vid,
        name=" -> ".join(names),
        parallelism=head.parallelism,
        max_parallelism=max_par[chain.head],
        parallelism_configured=head.parallelism_configured,
        adaptive_join=_adaptive_join(head.spec, [gate_edges[g] for g in gates_of[chain.head]]),
        adaptive_join_probe=_adaptive_join_probe(
            head.spec, [gate_edges[g] for g in gates_of[chain.head]], consumed),
        adaptive_join_probe_bytes=head.spec.probe_bytes if isinstance(head.spec, JoinSpec) else 0,
        invokable_class=invokable_class,
        invokable_payload=cloudpickle.dumps(op_chain),
        operator_ids=tuple(graph.node(nid).operator_id for nid in chain.nodes),
        operator_names=names,
        operator_state_kinds=tuple(state_kind(graph.node(nid).spec) for nid in chain.nodes),
        inputs=inputs,
        results=tuple(results),
        slot_sharing_group=head.slot_sharing_group,
        source=head.spec.source if isinstance(head.spec, SourceSpec) else None,
        sinks=tuple(
            graph.node(nid).spec.sink
            for nid in chain.nodes
            if isinstance(graph.node(nid).spec, SinkSpec)
        ),
    )


def _adaptive_join(spec: object, gate_edges: list[StreamEdge]) -> str:
    """``JobVertex.adaptive_join``: the join type of a hash join head with two HASH gates."""
    if (isinstance(spec, JoinSpec) and not spec.broadcast and len(gate_edges) == 2
            and all(e.partitioner is ShipStrategy.HASH for e in gate_edges)):
        return spec.how
    return ""


def _adaptive_join_probe(spec: object, gate_edges: list[StreamEdge],
                         consumed: Mapping[tuple[int, int, int], Columns]) -> str:
    """``JobVertex.adaptive_join_probe`` of an adaptive hash join head: the planner's probe side
    (``JoinSpec.probe``), else ``"any"``, when the columns the join's successors read are known
    (column pruning: the joined rows then cross the exchange with only those columns, as the
    two sides would have); "" otherwise."""
    if not _adaptive_join(spec, gate_edges) or not isinstance(spec, JoinSpec):
        return ""
    if any(consumed.get(_edge_key(e)) is None for e in gate_edges):
        return ""
    return spec.probe or "any"
