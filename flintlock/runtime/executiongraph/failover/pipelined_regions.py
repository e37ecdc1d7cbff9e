"""Pipelined regions of the execution graph (pure graph algorithm).

Follows Flink ``PipelinedRegionComputeUtil.buildRawRegions`` and
``SchedulingPipelinedRegionComputeUtil`` (fact sheet 4): vertices connected by MUST_BE_PIPELINED
edges form one region (union of sets, in topological order); BLOCKING edges are region boundaries.
Raw regions whose blocking edges form a cycle in the region graph are merged (strongly connected
components), as Flink does for scheduling regions. In a BATCH job whose edges are all BLOCKING every
execution vertex is its own region.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from flintlock.runtime.ids import ExecutionVertexID, IntermediateResultPartitionID
from flintlock.runtime.jobgraph.types import ResultPartitionType

__all__ = [
    "PipelinedRegion",
    "PipelinedRegions",
    "SchedulingTopology",
    "build_pipelined_regions",
]


class SchedulingTopology(Protocol):
    """The read-only view of the execution graph that regions and strategies need."""

    def execution_vertex_ids(self) -> Sequence[ExecutionVertexID]:
        """All execution vertices, producers before consumers."""
        ...

    def consumed_partition_ids(self, vertex_id: ExecutionVertexID) -> Sequence[IntermediateResultPartitionID]: ...

    def produced_partition_ids(self, vertex_id: ExecutionVertexID) -> Sequence[IntermediateResultPartitionID]: ...

    def partition_type(self, partition_id: IntermediateResultPartitionID) -> ResultPartitionType: ...

    def producer_of(self, partition_id: IntermediateResultPartitionID) -> ExecutionVertexID: ...

    def consumers_of(self, partition_id: IntermediateResultPartitionID) -> Sequence[ExecutionVertexID]: ...


@dataclass(frozen=True)
class PipelinedRegion:
    """A set of execution vertices that must be scheduled (and restarted) together."""

    index: int
    #: the region's vertices, in topological order
    vertices: tuple[ExecutionVertexID, ...]
    #: partitions produced outside the region that it consumes through non-pipelined edges
    consumed_blocking_partitions: frozenset[IntermediateResultPartitionID]

    def __contains__(self, vertex_id: object) -> bool:
        return vertex_id in self.vertices

    def __repr__(self) -> str:
        return f"<PipelinedRegion {self.index} {len(self.vertices)} vertices>"


class PipelinedRegions:
    """All regions of a topology plus the lookups schedulers and failover strategies need."""

    def __init__(self, topology: SchedulingTopology, regions: list[PipelinedRegion]) -> None:
        self.topology = topology
        #: regions in topological order (a region's producers come before it)
        self.regions = regions
        self._region_of: dict[ExecutionVertexID, PipelinedRegion] = {
            v: r for r in regions for v in r.vertices
        }

    def region_of(self, vertex_id: ExecutionVertexID) -> PipelinedRegion:
        return self._region_of[vertex_id]

    def add_blocking_vertices(self, vertex_ids: Iterable[ExecutionVertexID]) -> list[PipelinedRegion]:
        """A dynamic graph grew by ``vertex_ids``, whose inputs are all BLOCKING: each becomes
        its own region, after the existing ones (Flink ``DefaultExecutionTopology
        .notifyExecutionGraphUpdated`` for an all-blocking graph).

        Raises:
            ValueError: a vertex consumes a partition that must be consumed pipelined.
        """
        added: list[PipelinedRegion] = []
        for v in vertex_ids:
            consumed = self.topology.consumed_partition_ids(v)
            if any(self.topology.partition_type(p).must_be_pipelined_consumed() for p in consumed):
                raise ValueError(f"{v} consumes a pipelined partition; a dynamic graph must be "
                                 "all BLOCKING")
            region = PipelinedRegion(len(self.regions), (v,), frozenset(consumed))
            self.regions.append(region)
            self._region_of[v] = region
            added.append(region)
        return added

    def consumer_regions(self, region: PipelinedRegion) -> list[PipelinedRegion]:
        """Other regions that consume a partition produced in ``region``."""
        out: dict[int, PipelinedRegion] = {}
        for v in region.vertices:
            for p in self.topology.produced_partition_ids(v):
                for c in self.topology.consumers_of(p):
                    r = self._region_of[c]
                    if r.index != region.index:
                        out[r.index] = r
        return [out[i] for i in sorted(out)]

    def producer_region(self, partition_id: IntermediateResultPartitionID) -> PipelinedRegion:
        return self._region_of[self.topology.producer_of(partition_id)]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.regions)

    def __len__(self) -> int:
        return len(self.regions)


def _raw_regions(topology: SchedulingTopology) -> list[list[ExecutionVertexID]]:
    region_of: dict[ExecutionVertexID, list[ExecutionVertexID]] = {}
    for v in topology.execution_vertex_ids():
        current = [v]
        region_of[v] = current
        for p in topology.consumed_partition_ids(v):
            if not topology.partition_type(p).must_be_pipelined_consumed():
                continue
            producer_region = region_of[topology.producer_of(p)]
            if producer_region is current:
                continue
            # merge the smaller set into the larger one (Flink's union of sets)
            small, large = sorted((current, producer_region), key=len)
            large.extend(small)
            for u in small:
                region_of[u] = large
            current = large
    seen: set[int] = set()
    out: list[list[ExecutionVertexID]] = []
    for v in topology.execution_vertex_ids():
        r = region_of[v]
        if id(r) not in seen:
            seen.add(id(r))
            out.append(r)
    return out


def _strongly_connected(n: int, edges: dict[int, set[int]]) -> list[list[int]]:
    """Tarjan's algorithm (iterative); components in reverse topological order."""
    index = [0] * n
    low = [0] * n
    on_stack = [False] * n
    visited = [False] * n
    stack: list[int] = []
    counter = 1
    components: list[list[int]] = []
    for root in range(n):
        if visited[root]:
            continue
        work: list[tuple[int, Iterable[int]]] = [(root, iter(sorted(edges.get(root, ()))))]
        visited[root] = True
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if not visited[nxt]:
                    visited[nxt] = True
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack[nxt] = True
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == node:
                        break
                components.append(comp)
    return components


def build_pipelined_regions(topology: SchedulingTopology) -> PipelinedRegions:
    """Compute the scheduling regions of ``topology``."""
    raw = _raw_regions(topology)
    raw_of: dict[ExecutionVertexID, int] = {v: i for i, r in enumerate(raw) for v in r}
    edges: dict[int, set[int]] = {}
    for i, r in enumerate(raw):
        for v in r:
            for p in topology.consumed_partition_ids(v):
                j = raw_of[topology.producer_of(p)]
                if j != i:
                    edges.setdefault(j, set()).add(i)
    components = _strongly_connected(len(raw), edges)
    position = {v: k for k, v in enumerate(topology.execution_vertex_ids())}
    merged = [sorted((v for i in comp for v in raw[i]), key=position.__getitem__) for comp in components]
    merged.sort(key=lambda vs: position[vs[0]])
    regions: list[PipelinedRegion] = []
    for k, vertices in enumerate(merged):
        members = set(vertices)
        consumed = frozenset(
            p
            for v in vertices
            for p in topology.consumed_partition_ids(v)
            if topology.producer_of(p) not in members
            and not topology.partition_type(p).must_be_pipelined_consumed()
        )
        regions.append(PipelinedRegion(k, tuple(vertices), consumed))
    return PipelinedRegions(topology, _topological(regions, topology))


def _topological(regions: list[PipelinedRegion], topology: SchedulingTopology) -> list[PipelinedRegion]:
    """Order regions so that every producer region precedes its consumers (Kahn), re-indexed."""
    region_of = {v: r.index for r in regions for v in r.vertices}
    preds: dict[int, set[int]] = {r.index: set() for r in regions}
    for r in regions:
        for v in r.vertices:
            for p in topology.consumed_partition_ids(v):
                j = region_of[topology.producer_of(p)]
                if j != r.index:
                    preds[r.index].add(j)
    by_index = {r.index: r for r in regions}
    done: set[int] = set()
    ordered: list[PipelinedRegion] = []
    while len(ordered) < len(regions):
        ready = [i for i in sorted(preds) if i not in done and preds[i] <= done]
        if not ready:  # pragma: no cover - SCC merging removed all cycles
            raise AssertionError("cycle in the region graph")
        for i in ready:
            done.add(i)
            ordered.append(by_index[i])
    return [
        PipelinedRegion(k, r.vertices, r.consumed_blocking_partitions) for k, r in enumerate(ordered)
    ]
