"""Which hash join may run in its probe side's producer (pure; the AdaptiveBatchScheduler's).

Flink FLIP-470 broadcasts a hash join's input that turns out small at run time and lets the
other side (the probe side) reach the join without a shuffle. flintlock moves the join into the
probe side's producer instead (``runtime/spark/join_pushdown.py``), which is possible while that
producer has not been initialized yet and the small side has finished:

- ``probe_joins``: producers held back until their join's other side finished, for the joins the
  planner gave a probe side (``JobVertex.adaptive_join_probe`` ``"left"``/``"right"``; sources
  would otherwise start at once);
- ``probe_side_of``: any producer being initialized whose join's other side already finished
  (the planner could not tell the sizes, ``adaptive_join_probe`` ``"any"``, or it was held).

The scheduler then moves the join when the other side stored at most the run-time broadcast
threshold and the move pays (``ProbeJoin.pays``): every probe subtask reads the whole build side
and builds its hash table, which is worth it only when the probe side's exchange would carry
much more (TPC-H Q5 moves a 1.1 MB side to spare 6 million ``lineitem`` rows; Q19's 1.2 MB
``part`` side against 0.2 million filtered rows took twice as long moved).
"""

from __future__ import annotations

from dataclasses import dataclass

from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.executiongraph.execution_vertex import ExecutionJobVertex
from flintlock.runtime.executiongraph.intermediate_result import IntermediateResult
from flintlock.runtime.ids import IntermediateDataSetID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobEdge, JobVertex
from flintlock.runtime.jobgraph.types import ShipStrategy
from flintlock.runtime.operators.specs import probe_side_cut
from flintlock.runtime.scheduler.adaptivebatch.adaptive_join import AdaptiveJoinSettings

__all__ = [
    "BROADCAST_READS_PER_PROBE_BYTE",
    "UNCOMPRESSED_PER_STORED",
    "ProbeJoin",
    "probe_joins",
    "probe_side_of",
    "stored_bytes",
    "unread_build_side",
]


#: a moved join reads the build side once per probe subtask; it is taken when those reads (as
#: stored: compressed, about a fourth of the rows' uncompressed bytes) are at most an eighth of
#: the probe side's uncompressed bytes, i.e. about half of what its exchange would write
BROADCAST_READS_PER_PROBE_BYTE = 8
#: stored bytes (Parquet, Arrow) -> uncompressed bytes, for the probe side's own input
UNCOMPRESSED_PER_STORED = 4


@dataclass(frozen=True)
class ProbeJoin:
    """An adaptive hash join that may run in its probe side's producer (``probe_joins``)."""

    join_vertex: JobVertexID
    #: ``"left"``/``"right"``: the side the probe producer feeds
    probe_side: str
    #: the other side's dataset: read whole by the probe producer if small enough
    build_dataset: IntermediateDataSetID
    #: the probe side's expected bytes (uncompressed rows): the planner's estimate for a held
    #: producer, else ``UNCOMPRESSED_PER_STORED`` x what its own inputs stored
    probe_bytes: int = 0
    #: the join type cannot broadcast the other side, but drops this side's unmatched rows: the
    #: producer only cuts its rows to the other side's keys (a semi join) and the join stays
    reduce_only: bool = False

    @property
    def build_side(self) -> str:
        return "right" if self.probe_side == "left" else "left"

    def pays(self, build_stored: int, probe_parallelism: int) -> bool:
        """Whether moving the join is worth it: the build side, read by each of the probe's
        subtasks, stays within ``1 / BROADCAST_READS_PER_PROBE_BYTE`` of the probe side."""
        return build_stored * probe_parallelism * BROADCAST_READS_PER_PROBE_BYTE <= self.probe_bytes


def stored_bytes(result: IntermediateResult) -> int:
    """What a finished result's partitions stored (missing sizes count 0)."""
    return sum(sum(p.location.bytes_per_subpartition) for p in result.partitions
               if p.location is not None)


def probe_joins(graph: ExecutionGraph, settings: AdaptiveJoinSettings) -> dict[JobVertexID, ProbeJoin]:
    """Probe side producers whose initialization waits for their join's other side (pure).

    A join vertex sized at run time whose head hash join has a compile-time probe side
    (``JobVertex.adaptive_join_probe`` ``"left"``/``"right"``) qualifies when run-time broadcast
    joins are on (``table.optimizer.adaptive-broadcast-join.strategy`` not NONE, a threshold
    set) and the probe side's producer is also sized at run time (not yet initialized), feeds
    only this join, and is not the other side's producer. Returned: probe producer -> its join.
    Once the other side finished, ``AdaptiveBatchScheduler`` decides by its stored bytes."""
    if settings.broadcast_strategy == "NONE" or settings.broadcast_threshold < 0:
        return {}
    out: dict[JobVertexID, ProbeJoin] = {}
    for ejv in graph.job_vertices.values():
        jv = ejv.job_vertex
        if jv.adaptive_join_probe not in ("left", "right"):
            continue
        edges = _join_edges(graph, ejv)
        if edges is None:
            continue
        probe_edge, build_edge = edges if jv.adaptive_join_probe == "left" else edges[::-1]
        producer = graph.job_vertices[graph.producer_vertex_of(probe_edge.source)]
        reduce_only = _reduce_only(jv.adaptive_join, jv.adaptive_join_probe, settings)
        if producer.initialized or producer.id not in graph.dynamic_vertices \
                or len(producer.job_vertex.results) != 1 or reduce_only is None \
                or producer.id == graph.producer_vertex_of(build_edge.source):
            continue
        out[producer.id] = ProbeJoin(jv.id, jv.adaptive_join_probe, build_edge.source,
                                     jv.adaptive_join_probe_bytes, reduce_only)
    return out


def probe_side_of(graph: ExecutionGraph, producer: ExecutionJobVertex,
                  settings: AdaptiveJoinSettings) -> ProbeJoin | None:
    """The join a producer that is being initialized may run as its probe side (pure): it is
    sized at run time and feeds only a join sized at run time, not yet initialized, whose
    head may move (``JobVertex.adaptive_join_probe`` set), whose join type lets this side
    run the join or cut its rows (``specs.probe_side_cut``), and whose other side's producer
    already finished. None otherwise."""
    jv = producer.job_vertex
    if producer.id not in graph.dynamic_vertices or len(jv.results) != 1:
        return None
    dataset = jv.results[0]
    join = graph.job_vertices[dataset.consumer]
    edges = _join_edges(graph, join)
    if edges is None or not join.job_vertex.adaptive_join_probe:
        return None
    side = "left" if edges[0].source == dataset.id else "right"
    build_edge = edges[1] if side == "left" else edges[0]
    reduce_only = _reduce_only(join.job_vertex.adaptive_join, side, settings)
    if reduce_only is None:
        return None
    build = graph.job_vertices[graph.producer_vertex_of(build_edge.source)]
    if build.id == producer.id or not build.initialized or not build.all_finished():
        return None
    read = sum(stored_bytes(graph.results[e.source]) for e in jv.inputs)
    return ProbeJoin(join.id, side, build_edge.source, read * UNCOMPRESSED_PER_STORED, reduce_only)


def _reduce_only(how: str, probe_side: str, settings: AdaptiveJoinSettings) -> bool | None:
    """``specs.probe_side_cut`` with the job's runtime-filter setting."""
    return probe_side_cut(how, probe_side, settings.runtime_filter)


def _join_edges(graph: ExecutionGraph, join: ExecutionJobVertex) -> list[JobEdge] | None:
    """The two HASH input edges (left, right) of the head join of a join vertex sized at run
    time and not yet initialized (its gates 0 and 1), else None. Further inputs must be
    BROADCAST (e.g. TPC-H Q22's average, crossed with the joined rows later in the chain)."""
    jv = join.job_vertex
    if not jv.adaptive_join or join.initialized or jv.id not in graph.dynamic_vertices:
        return None
    edges = sorted(jv.inputs, key=lambda e: e.type_number)
    head, rest = edges[:2], edges[2:]
    if len(head) != 2 or [e.type_number for e in head] != [0, 1] \
            or any(e.ship_strategy is not ShipStrategy.HASH for e in head) \
            or any(e.ship_strategy is not ShipStrategy.BROADCAST for e in rest):
        return None
    return head


def unread_build_side(jv: JobVertex, pushed_probe_side: str) -> IntermediateDataSetID | None:
    """The build side's dataset of a join whose probe producers ran the join: its subtasks do
    not read it, so its bytes do not size them."""
    if not pushed_probe_side:
        return None
    edges = sorted(jv.inputs, key=lambda e: e.type_number)
    return edges[1].source if pushed_probe_side == "left" else edges[0].source
