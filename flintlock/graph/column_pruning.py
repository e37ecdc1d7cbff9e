"""Column pruning across exchanges: which columns a consumer reads of each of its inputs.

Inside one subtask Spark prunes the columns its plan does not need; across a vertex boundary it
cannot, so a producer would write every column of its rows into the partition (all of
``partsupp`` with its comments, where the consumer joins on two keys and sums two numbers). Like
Flink's planner (projection push-down, ``FlinkLogicalCalc`` pruning before an Exchange), the
JobGraph generator gives each non-chained output the columns its consumer reads
(``OutputSpec.columns``), and the producer projects its rows to those it has
(``runtime.spark.stream_task``) before writing them.

``consumed_columns`` walks the StreamGraph from its sinks: a node's output must carry what its
consumers read of it (the union over its out-edges); what a node reads of its input follows from
what is read of its output and from the columns its expressions reference
(``api.columns.column_references``). Names are compared case-insensitively (Spark's default
resolution) and kept lower-case. ``None`` means every column: sinks, Python functions, SQL-string
expressions, operators whose result depends on all columns (distinct), and anything unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flintlock.graph.stream_graph import StreamEdge, StreamGraph
from flintlock.runtime.operators import specs as S

__all__ = ["Columns", "consumed_columns", "input_columns", "lower_names"]

#: a set of lower-case column names, or None for every column
Columns = frozenset[str] | None


def _union(*parts: Columns) -> Columns:
    out: set[str] = set()
    for p in parts:
        if p is None:
            return None
        out |= p
    return frozenset(out)


def _refs(columns: Iterable[Any]) -> Columns:
    from flintlock.api.columns import column_references

    out: set[str] = set()
    for c in columns:
        refs = column_references(c)
        if refs is None:
            return None
        out |= {r.lower() for r in refs}
    return frozenset(out)


def lower_names(names: Iterable[str]) -> frozenset[str]:
    """``names`` lower-cased (how this module compares column names)."""
    return frozenset(n.lower() for n in names)


def input_columns(spec: Any, input_index: int, needed: Columns) -> Columns:
    """The columns an operator reads of input ``input_index`` when ``needed`` of its output are
    read downstream."""
    if isinstance(spec, S.SelectSpec):
        return _refs(spec.columns)
    if isinstance(spec, S.FilterSpec):
        return _union(needed, _refs([spec.condition]))
    if isinstance(spec, S.WithColumnSpec):
        if needed is None:
            return None
        return _union(needed - {spec.name.lower()}, _refs([spec.column]))
    if isinstance(spec, (S.DropSpec, S.LimitSpec, S.UnionSpec)):
        return needed
    if isinstance(spec, S.SortSpec):
        return _union(needed, _refs(spec.columns))
    if isinstance(spec, (S.KeyedAggregateSpec, S.LocalAggregateSpec)):
        return _union(lower_names(spec.keys), _refs(spec.aggregates))
    if isinstance(spec, S.GlobalAggregateSpec):
        return _refs(spec.aggregates)
    if isinstance(spec, S.JoinSpec):
        if spec.how in ("semi", "anti"):  # the output is the left side's rows
            if input_index == 1:
                return lower_names(spec.right_on)  # it only decides which left rows stay
            return _union(needed, lower_names(spec.left_on))
        return _union(needed, lower_names(spec.left_on), lower_names(spec.right_on))
    return None


def consumed_columns(graph: StreamGraph) -> dict[tuple[int, int, int], Columns]:
    """For every edge ``(source_id, target_id, type_number)``: the columns of the source's output
    the target reads (see the module docstring)."""
    nodes = {n.id: n for n in graph.nodes}
    out_edges: dict[int, list[StreamEdge]] = {}
    for e in graph.edges:
        out_edges.setdefault(e.source_id, []).append(e)
    needed: dict[int, Columns] = {}
    consumed: dict[tuple[int, int, int], Columns] = {}

    def output_needed(node_id: int) -> Columns:
        if node_id not in needed:
            edges = out_edges.get(node_id, [])
            needed[node_id] = (_union(*(edge_needed(e) for e in edges)) if edges else None)
        return needed[node_id]

    def edge_needed(e: StreamEdge) -> Columns:
        key = (e.source_id, e.target_id, e.type_number)
        if key not in consumed:
            consumed[key] = input_columns(nodes[e.target_id].spec, e.type_number,
                                          output_needed(e.target_id))
        return consumed[key]

    for node_id in sorted(nodes, reverse=True):  # consumers mostly come later: shallow recursion
        output_needed(node_id)
    return {(e.source_id, e.target_id, e.type_number): edge_needed(e) for e in graph.edges}
