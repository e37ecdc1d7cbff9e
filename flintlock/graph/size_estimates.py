"""Compile-time size estimates of StreamGraph nodes, for automatic broadcast joins.

``estimated_bytes`` follows a node back through one-input operators that do not add rows (select,
filter, with_column, drop, map, limit) to its source and estimates what the node outputs the way
Flink's batch planner does without collected statistics beyond the files' own (Flink
``FlinkRelMdRowCount``/``FlinkRelMdSize``, Calcite ``RelMdUtil.guessSelectivity``):

    bytes = source rows x selectivity of the filters x average bytes of the columns the output reads

- Parquet sources: rows and each column's uncompressed bytes from the files' footers
  (``connectors.parquet_statistics``); the output's columns are traced back through select and
  with_column expressions to the source columns they read (``api.columns.column_references``), so
  a projection shrinks the estimate as Spark's column pruning shrinks the scan.
- Filters: Calcite's guesses per conjunct of an AND: ``=`` 0.15, ``<``/``<=``/``>``/``>=`` 0.5,
  ``isNotNull`` 0.9, anything else (SQL strings, Python predicates) 0.25.
- ``limit(n)``: at most n rows.
- Other sources: the bytes of their files (CSV, JSON, text: the files' size times the filters'
  selectivity, no projection), the Arrow IPC bytes of a collection, 8 bytes per number of a
  sequence.

``None`` when the node is behind any other operator (an aggregation, a join, a Python map over a
source without row statistics...), when its source cannot be listed from the client (e.g. a path
only the cluster sees), or for unknown sources.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from flintlock.graph.stream_graph import StreamEdge, StreamNode
from flintlock.runtime.operators.specs import (
    DropSpec,
    FilterFunctionSpec,
    FilterSpec,
    LimitSpec,
    MapSpec,
    SelectSpec,
    SourceSpec,
    WithColumnSpec,
)

__all__ = ["estimated_bytes", "selectivity", "source_bytes"]

log = logging.getLogger(__name__)

_PASS_THROUGH = (SelectSpec, FilterSpec, FilterFunctionSpec, WithColumnSpec, DropSpec, MapSpec,
                 LimitSpec)

#: Calcite's ``RelMdUtil.guessSelectivity`` per predicate kind (Flink's planner default)
_EQUALS, _COMPARISON, _NOT_NULL, _OTHER = 0.15, 0.5, 0.9, 0.25
_COMPARISONS = frozenset({"<", "<=", ">", ">="})


def selectivity(condition: Any) -> float:
    """The guessed share of rows ``condition`` (a Column, a SQL string, or None for a Python
    predicate) keeps: the product of Calcite's guess for each conjunct of its top-level ANDs."""
    expr = getattr(condition, "_expr", None)
    if expr is None:
        return _OTHER
    out = 1.0
    stack = [expr]
    while stack:
        e = stack.pop()
        name = getattr(e, "_name", None) if type(e).__name__ == "UnresolvedFunction" else None
        args = list(getattr(e, "_args", ()) or ())
        if name == "and" and len(args) == 2:
            stack.extend(args)
        elif name == "==":
            out *= _EQUALS
        elif name in _COMPARISONS:
            out *= _COMPARISON
        elif name == "isNotNull":
            out *= _NOT_NULL
        else:
            out *= _OTHER
    return out


def estimated_bytes(nodes: Mapping[int, StreamNode], edges: Sequence[StreamEdge],
                    node_id: int, sources: dict[int, Any] | None = None) -> int | None:
    """An estimate of the bytes node ``node_id`` outputs (see the module docstring), or None
    when unknown. ``sources`` caches what was read about each source node (its files' listing
    and footers), for a caller that estimates several nodes of one graph."""
    chain: list[Any] = []
    while len(chain) <= len(nodes):
        node = nodes[node_id]
        if isinstance(node.spec, SourceSpec):
            cache = {} if sources is None else sources
            if node_id not in cache:
                cache[node_id] = _source_facts(node.spec.source)
            stats, size = cache[node_id]
            return _estimate(stats, size, list(reversed(chain)))
        if not isinstance(node.spec, _PASS_THROUGH):
            return None
        ins = [e for e in edges if e.target_id == node_id]
        if len(ins) != 1:
            return None
        chain.append(node.spec)
        node_id = ins[0].source_id
    return None  # pragma: no cover - the graph is acyclic


def _source_facts(source: object) -> tuple[Any, int | None]:
    """(Parquet statistics or None, the source's bytes when there are no statistics)."""
    stats = _parquet_statistics(source)
    return stats, (None if stats is not None else source_bytes(source))


def _row_share(spec: Any) -> float:
    """The share of rows an operator keeps (1 for those that keep every row)."""
    if isinstance(spec, FilterSpec):
        return selectivity(spec.condition)
    if isinstance(spec, FilterFunctionSpec):
        return _OTHER
    return 1.0


def _estimate(stats: Any, size: int | None, specs: list[Any]) -> int | None:
    """The output bytes of ``specs`` (source first) applied to a source with Parquet
    statistics ``stats``, or else of ``size`` bytes."""
    if stats is None:
        if size is None:
            return None
        share = 1.0
        for spec in specs:
            share *= _row_share(spec)
        return int(size * share)
    rows = float(stats.rows)
    # lineage: each output column -> the source columns it reads (None: every source column)
    lineage: dict[str, frozenset[str] | None] = {c: frozenset({c}) for c in stats.column_bytes}
    for spec in specs:
        rows, lineage = _apply(spec, rows, lineage)
    read: set[str] = set()
    for sources in lineage.values():
        read |= set(stats.column_bytes) if sources is None else sources
    width = sum(stats.average_bytes(c) or 0.0 for c in read)
    return int(rows * width)


def _apply(spec: Any, rows: float, lineage: dict[str, frozenset[str] | None]
           ) -> tuple[float, dict[str, frozenset[str] | None]]:
    """Rows and column lineage after one pass-through operator."""
    from flintlock.api.columns import column_name, column_references, sql_identifier

    def traced(refs: frozenset[str] | None) -> frozenset[str] | None:
        if refs is None or any(r not in lineage for r in refs):
            return None
        out: set[str] = set()
        for r in refs:
            sources = lineage[r]
            if sources is None:
                return None
            out |= sources
        return frozenset(out)

    if isinstance(spec, (FilterSpec, FilterFunctionSpec)):
        return rows * _row_share(spec), lineage
    if isinstance(spec, LimitSpec):
        return min(rows, float(spec.n)), lineage
    if isinstance(spec, SelectSpec):
        selected: dict[str, frozenset[str] | None] = {}
        for i, col in enumerate(spec.columns):
            if isinstance(col, str) and col.strip() == "*":
                selected.update(lineage)
                continue
            name = col if isinstance(col, str) else (column_name(col) or sql_identifier(col)
                                                       or f"_col{i}")
            selected[name] = traced(column_references(col))
        return rows, selected
    if isinstance(spec, WithColumnSpec):
        return rows, {**lineage, spec.name: traced(column_references(spec.column))}
    if isinstance(spec, DropSpec):
        return rows, {k: v for k, v in lineage.items() if k not in spec.names}
    # MapSpec: a Python function of the whole row
    return rows, {"_map": None}


def _parquet_statistics(source: object) -> Any:
    from flintlock.connectors.file import FileSource
    from flintlock.connectors.parquet_statistics import parquet_statistics

    if not isinstance(source, FileSource) or source.format != "parquet" or not source.bounded:
        return None
    try:
        return parquet_statistics(source.list_files())
    except Exception as exc:  # not listable from here: no estimate, no broadcast
        log.debug("no statistics for %r: %s", source, exc)
        return None


def source_bytes(source: object) -> int | None:
    """The bytes a source reads, or None when unknown (see the module docstring)."""
    from flintlock.connectors.collection import CollectionSource, SequenceSource
    from flintlock.connectors.file import FileSource

    try:
        if isinstance(source, FileSource):
            return sum(f.size for f in source.list_files())
        if isinstance(source, CollectionSource):
            return len(source.arrow_ipc)
        if isinstance(source, SequenceSource):
            return 8 * max(0, source.end_inclusive - source.start + 1)
    except Exception as exc:  # not listable from here: no estimate, no broadcast
        log.debug("no size estimate for %r: %s", source, exc)
    return None
