"""What STREAMING mode accepts: source boundedness and the operators a streaming job may use.

Flink's rules (``StreamGraphGenerator``, ``RuntimeExecutionMode``): AUTOMATIC runs BATCH when every
source is bounded, else STREAMING; BATCH with an unbounded source is an error. flintlock's
streaming data plane runs a subtask's chain once per epoch over the records that arrived
(``flintlock.runtime.spark.streaming_task``), so it accepts the operators whose result over a
stream is the union of their results over its epochs: sources, projections, filters, map /
flat_map / map_batches, union, rebalance / shuffle / broadcast / key_by exchanges and sinks.
Operators that need all of their input or keyed state across epochs (aggregations, joins,
distinct, sort, limit, keyed reduce/process without windows) are refused with a clear message
until windows and keyed state exist.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flintlock.api.exceptions import InvalidProgramException
from flintlock.runtime.operators import specs as S

__all__ = ["STREAMING_OPERATORS", "check_streaming_operators", "is_bounded", "unbounded_sources"]

#: Operator specs a STREAMING job may use (each is applied epoch by epoch).
STREAMING_OPERATORS = (
    S.SourceSpec, S.SelectSpec, S.FilterSpec, S.FilterFunctionSpec, S.WithColumnSpec, S.DropSpec,
    S.MapSpec, S.FlatMapSpec, S.MapBatchesSpec, S.UnionSpec, S.SinkSpec,
)


def is_bounded(source: Any) -> bool:
    """A source is bounded unless it says otherwise (``bounded`` attribute, Flink ``Boundedness``)."""
    return bool(getattr(source, "bounded", True))


def unbounded_sources(transformations: Iterable[Any]) -> list[Any]:
    """The unbounded sources reachable upstream of ``transformations`` (sinks), in visit order."""
    out: list[Any] = []
    seen: set[int] = set()
    stack = list(transformations)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        source = getattr(t, "source", None)
        if source is not None and not is_bounded(source):
            out.append(source)
        stack.extend(getattr(t, "inputs", ()))
    return out


def check_streaming_operators(nodes: Iterable[Any]) -> None:
    """Refuse operators the streaming data plane cannot run yet.

    Args:
        nodes: the StreamGraph's nodes (``name`` and ``spec`` attributes).

    Raises:
        InvalidProgramException: names the first such operator and what to do.
    """
    for node in nodes:
        if not isinstance(node.spec, STREAMING_OPERATORS):
            raise InvalidProgramException(
                f"Operator '{node.name}' ({type(node.spec).__name__.removesuffix('Spec')}) is not "
                "supported in STREAMING mode yet: streaming jobs run sources, select / filter / "
                "with_column / drop, map / flat_map / map_batches, union, exchanges and sinks. "
                "Run the program in BATCH mode (bounded sources), or drop the operator."
            )
