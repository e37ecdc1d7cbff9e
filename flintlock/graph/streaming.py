"""What STREAMING mode accepts: source boundedness and the operators a streaming job may use.

Flink's rules (``StreamGraphGenerator``, ``RuntimeExecutionMode``): AUTOMATIC runs BATCH when every
source is bounded, else STREAMING; BATCH with an unbounded source is an error. flintlock's
streaming data plane runs a subtask's chain once per epoch over the records that arrived
(``flintlock.runtime.spark.streaming_task``), so it accepts the operators whose result over a
stream is the union of their results over its epochs (sources, projections, filters, map /
flat_map / map_batches, union, rebalance / shuffle / broadcast / key_by exchanges and sinks), and
the operators that keep keyed state across epochs themselves (watermark assigners, windows,
side outputs, ``KeyedProcessFunction`` with state and timers). Operators that need all of their
input at once (unwindowed aggregations, joins, distinct, sort, limit, keyed reduce and the
batch-shaped ``process(key, rows)``) are refused with a clear message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flintlock.api.exceptions import InvalidProgramException
from flintlock.runtime.operators import specs as S
from flintlock.runtime.operators.time_specs import TIME_SPECS

__all__ = ["STREAMING_OPERATORS", "check_streaming_operators", "is_bounded", "unbounded_sources"]

#: Operator specs a STREAMING job may use (each is applied epoch by epoch).
STREAMING_OPERATORS = (
    S.SourceSpec, S.SelectSpec, S.FilterSpec, S.FilterFunctionSpec, S.WithColumnSpec, S.DropSpec,
    S.MapSpec, S.FlatMapSpec, S.MapBatchesSpec, S.UnionSpec, S.SinkSpec, *TIME_SPECS,
)


#: how the refusal names what the user wrote (two-phase aggregations are split before the check)
_KINDS = {
    S.LocalAggregateSpec: "an aggregation without windows",
    S.MergeAggregateSpec: "an aggregation without windows",
    S.KeyedAggregateSpec: "an aggregation without windows",
    S.GlobalAggregateSpec: "an aggregation without windows",
    S.KeyedProcessSpec: "process(key, rows) over all rows of a key",
}


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
            name = node.name
            if isinstance(node.spec, (S.LocalAggregateSpec, S.MergeAggregateSpec)):
                name = name.removeprefix("Local").removeprefix("Merge")  # the user's operator
            kind = _KINDS.get(type(node.spec), type(node.spec).__name__.removesuffix("Spec"))
            raise InvalidProgramException(
                f"Operator '{name}' ({kind}) is not "
                "supported in STREAMING mode: streaming jobs run sources, select / filter / "
                "with_column / drop, map / flat_map / map_batches, union, exchanges, "
                "assign_timestamps_and_watermarks, key_by(...).window(...), "
                "key_by(...).process(KeyedProcessFunction with process_element) and sinks. "
                "Aggregate over windows instead, or run the program in BATCH mode (bounded "
                "sources)."
            )
