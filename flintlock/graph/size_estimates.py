"""Compile-time size estimates of StreamGraph nodes, for automatic broadcast joins.

``estimated_bytes`` follows a node back through one-input operators that never add rows or bytes
per row beyond a projection (select, filter, with_column, drop, map, limit) to its source and
returns the source's size: the bytes of its files (``FileSource.list_files``, listed on the client),
the Arrow IPC bytes of a collection, 8 bytes per number of a sequence. Like Spark's
``spark.sql.autoBroadcastJoinThreshold`` without statistics, it does not shrink the estimate for
filters or projections. ``None`` when the node is behind any other operator, when its source
cannot be listed from the client (e.g. a path only the cluster sees), or for unknown sources.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

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

__all__ = ["estimated_bytes", "source_bytes"]

log = logging.getLogger(__name__)

_PASS_THROUGH = (SelectSpec, FilterSpec, FilterFunctionSpec, WithColumnSpec, DropSpec, MapSpec,
                 LimitSpec)


def estimated_bytes(nodes: Mapping[int, StreamNode], edges: Sequence[StreamEdge],
                    node_id: int) -> int | None:
    """An upper-bound estimate of the bytes node ``node_id`` outputs, or None when unknown."""
    seen = 0
    while seen <= len(nodes):
        node = nodes[node_id]
        if isinstance(node.spec, SourceSpec):
            return source_bytes(node.spec.source)
        if not isinstance(node.spec, _PASS_THROUGH):
            return None
        ins = [e for e in edges if e.target_id == node_id]
        if len(ins) != 1:
            return None
        node_id = ins[0].source_id
        seen += 1
    return None  # pragma: no cover - the graph is acyclic


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
