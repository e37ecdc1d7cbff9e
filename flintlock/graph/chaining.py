"""Operator chaining: which StreamGraph edges are fused into one JobVertex (pure functions).

Shapes: a ``Chain`` is the head node id plus the chain's node ids in topological order (head
first). Every node belongs to exactly one chain. A node is a chain head unless it has exactly one
input edge and that edge is chainable, or it is a broadcast join (``JoinSpec.broadcast``) whose
probe-side edge is chainable and whose build-side edge is BROADCAST: then the join runs in its
probe side's vertex and reads the build side through an input gate of that vertex (Flink's batch
planner does the same with its multiple-input operators around a broadcast hash join, so the
probe side crosses no exchange). Chains are trees (a node may feed several chained successors).
``compute_chains`` returns the chains in a topological order of the JobGraph; a broadcast join
whose chaining would make its vertex depend on itself stays a chain head.

Follows Flink ``StreamingJobGraphGenerator.isChainable`` / ``areOperatorsChainable`` /
``arePartitionerAndExchangeModeChainable`` (fact sheet 3.1).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection
from dataclasses import dataclass

from flintlock.graph.stream_graph import ChainingStrategy, StreamEdge, StreamGraph, StreamNode
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators.specs import JoinSpec

__all__ = [
    "Chain",
    "chained_in_edge",
    "chained_in_edges",
    "compute_chains",
    "is_chainable",
    "topological_order",
]


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


def chained_in_edge(
    graph: StreamGraph, node_id: int, unchained: Collection[int] = ()
) -> StreamEdge | None:
    """The edge through which ``node_id`` is chained to its predecessor, or None for a head.

    ``unchained``: broadcast joins that must stay chain heads (see ``compute_chains``).
    """
    ins = graph.in_edges(node_id)
    if len(ins) == 2 and node_id not in unchained:
        return _broadcast_probe_edge(graph, node_id, ins)
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


def _broadcast_probe_edge(
    graph: StreamGraph, node_id: int, ins: tuple[StreamEdge, ...]
) -> StreamEdge | None:
    node = graph.node(node_id)
    spec = node.spec
    if not isinstance(spec, JoinSpec) or spec.broadcast not in ("left", "right"):
        return None
    build_gate = 0 if spec.broadcast == "left" else 1
    build = [e for e in ins if e.type_number == build_gate]
    probe = [e for e in ins if e.type_number != build_gate]
    if len(build) != 1 or len(probe) != 1 or build[0].partitioner is not ShipStrategy.BROADCAST:
        return None
    edge = probe[0]
    ok = is_chainable(graph.node(edge.source_id), node, edge, down_inputs=1,
                      chaining_enabled=graph.chaining_enabled)
    return edge if ok else None


def chained_in_edges(graph: StreamGraph) -> dict[int, StreamEdge]:
    """Node id -> the edge it is chained through, for every non-head node of ``compute_chains``."""
    return _assign(graph, _unchained_joins(graph))[2]


def compute_chains(graph: StreamGraph) -> tuple[Chain, ...]:
    """Split the graph into chains, in a topological order of the resulting JobGraph.

    Without broadcast joins this is the topological order of the chains' heads; in general, the
    chains' own topological order, the chain whose head comes first among the ready ones first.
    """
    order, head_of, via = _assign(graph, _unchained_joins(graph))
    chains = _chain_order(graph, order, head_of, via)
    assert chains is not None, "_unchained_joins leaves no cycle"
    return chains


def _assign(
    graph: StreamGraph, unchained: Collection[int]
) -> tuple[tuple[int, ...], dict[int, int], dict[int, StreamEdge]]:
    """(topological order, node -> its chain's head, node -> the edge it is chained through)."""
    order = topological_order(graph)
    head_of: dict[int, int] = {}
    via: dict[int, StreamEdge] = {}
    for nid in order:
        edge = chained_in_edge(graph, nid, unchained)
        if edge is None:
            head_of[nid] = nid
        else:
            head_of[nid] = head_of[edge.source_id]
            via[nid] = edge
    return order, head_of, via


def _chain_order(
    graph: StreamGraph, order: tuple[int, ...], head_of: dict[int, int],
    via: dict[int, StreamEdge],
) -> tuple[Chain, ...] | None:
    """The chains in JobGraph topological order, or None when their dependencies form a cycle."""
    position = {nid: i for i, nid in enumerate(order)}
    members: dict[int, list[int]] = {}
    for nid in order:
        members.setdefault(head_of[nid], []).append(nid)
    waiting: dict[int, set[int]] = {h: set() for h in members}
    consumers: dict[int, set[int]] = {h: set() for h in members}
    for e in graph.edges:
        if via.get(e.target_id) == e:
            continue
        a, b = head_of[e.source_id], head_of[e.target_id]
        if a == b:
            return None  # the vertex would consume its own output
        waiting[b].add(a)
        consumers[a].add(b)
    ready = [(position[h], h) for h in members if not waiting[h]]
    heapq.heapify(ready)
    chains: list[Chain] = []
    while ready:
        _, h = heapq.heappop(ready)
        chains.append(Chain(head=h, nodes=tuple(members[h])))
        for c in consumers[h]:
            waiting[c].discard(h)
            if not waiting[c]:
                heapq.heappush(ready, (position[c], c))
    return tuple(chains) if len(chains) == len(members) else None


def _unchained_joins(graph: StreamGraph) -> frozenset[int]:
    """Broadcast joins that must stay heads so that the chains form a DAG."""
    unchained: set[int] = set()
    while True:
        order, head_of, via = _assign(graph, unchained)
        if _chain_order(graph, order, head_of, via) is not None:
            return frozenset(unchained)
        joins = [nid for nid in via if len(graph.in_edges(nid)) > 1]
        if not joins:  # pragma: no cover - single-input chaining never forms a cycle
            raise ValueError(f"stream graph {graph.job_name!r}: chains form a cycle")
        unchained.update(joins)
