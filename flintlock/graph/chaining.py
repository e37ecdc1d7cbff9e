"""Operator chaining: which StreamGraph edges are fused into one JobVertex (pure functions).

Shapes: a ``Chain`` is the head node id plus the chain's node ids in topological order (head
first). Every node belongs to exactly one chain. A node is a chain head unless it has exactly one
input edge and that edge is chainable; chains are trees (a node may feed several chained
successors). Ordering chains by their head's topological position is a topological order of the
JobGraph (a non-chained edge always ends at a head that comes after its producer).

Follows Flink ``StreamingJobGraphGenerator.isChainable`` / ``areOperatorsChainable`` /
``arePartitionerAndExchangeModeChainable`` (fact sheet 3.1).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from flintlock.graph.stream_graph import ChainingStrategy, StreamEdge, StreamGraph, StreamNode
from flintlock.runtime.jobgraph.types import ShipStrategy

__all__ = ["Chain", "chained_in_edge", "compute_chains", "is_chainable", "topological_order"]


@dataclass(frozen=True)
class Chain:
    """One future JobVertex: ``head`` plus all chained node ids (head first, topological)."""

    head: int
    nodes: tuple[int, ...]


def is_chainable(
    up: StreamNode,
    down: StreamNode,
    edge: StreamEdge,
    *,
    down_inputs: int = 1,
    chaining_enabled: bool = True,
) -> bool:
    """Whether ``edge`` (up -> down) may be chained, by Flink's ``isChainable`` rules.

    Args:
        up: the producing node.
        down: the consuming node.
        edge: the edge between them.
        down_inputs: number of input edges of ``down``.
        chaining_enabled: ``pipeline.operator-chaining.enabled``.

    Returns:
        True iff down has one input, chaining is on, both share a slot sharing group, up is not
        NEVER, down is neither NEVER nor HEAD, the parallelisms are equal and the edge is FORWARD.
    """
    return (
        down_inputs == 1
        and chaining_enabled
        and up.slot_sharing_group == down.slot_sharing_group
        and up.chaining_strategy is not ChainingStrategy.NEVER
        and down.chaining_strategy is ChainingStrategy.ALWAYS
        and up.parallelism == down.parallelism
        and edge.partitioner is ShipStrategy.FORWARD
    )


def topological_order(graph: StreamGraph) -> tuple[int, ...]:
    """Node ids in topological order, smallest id first among ready nodes (Kahn).

    Raises:
        ValueError: the graph has a cycle.
    """
    indegree = {n.id: len(graph.in_edges(n.id)) for n in graph.nodes}
    ready = [nid for nid, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        nid = heapq.heappop(ready)
        order.append(nid)
        for e in graph.out_edges(nid):
            indegree[e.target_id] -= 1
            if indegree[e.target_id] == 0:
                heapq.heappush(ready, e.target_id)
    if len(order) != len(graph.nodes):
        raise ValueError(f"stream graph {graph.job_name!r} has a cycle")
    return tuple(order)


def chained_in_edge(graph: StreamGraph, node_id: int) -> StreamEdge | None:
    """The edge through which ``node_id`` is chained to its predecessor, or None for a head."""
    ins = graph.in_edges(node_id)
    if len(ins) != 1:
        return None
    edge = ins[0]
    ok = is_chainable(
        graph.node(edge.source_id),
        graph.node(node_id),
        edge,
        down_inputs=len(ins),
        chaining_enabled=graph.chaining_enabled,
    )
    return edge if ok else None


def compute_chains(graph: StreamGraph) -> tuple[Chain, ...]:
    """Split the graph into chains, ordered topologically by their heads."""
    order = topological_order(graph)
    head_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    heads: list[int] = []
    for nid in order:
        edge = chained_in_edge(graph, nid)
        if edge is None:
            head_of[nid] = nid
            members[nid] = [nid]
            heads.append(nid)
        else:
            head = head_of[edge.source_id]
            head_of[nid] = head
            members[head].append(nid)
    return tuple(Chain(head=h, nodes=tuple(members[h])) for h in heads)
