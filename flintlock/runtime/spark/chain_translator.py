"""Operator chain -> DataFrame plans (one per node; outputs and sinks end in them).

The chain head reads the task's input: a ``SourceSpec`` reads the subtask's splits; any other head
reads its input gates (a one-input operator with several gates reads their union, a ``JoinSpec``
joins gate 0 with gate 1, a ``UnionSpec`` unions all gates). Every other node applies its spec to
its chained input's DataFrame. Nothing runs here except the analysis round trips some PySpark
calls need (DDL parsing, ``df.schema`` for schema-preserving Python operators); actions happen in
``stream_task``.

Spec -> Spark: Select/Filter/WithColumn/Drop -> select/filter/withColumn/drop; KeyedAggregate ->
groupBy.agg; GlobalAggregate -> agg; LocalAggregate / MergeAggregate -> groupBy(keys).agg (``agg``
without keys) of the partial / merge columns of ``flintlock.runtime.operators.aggregation``; Distinct -> distinct; Sort -> orderBy; Limit -> limit;
Join -> join (semi/anti -> left_semi/left_anti, cross -> crossJoin; ``on=[...]`` when both sides'
keys are equal; the broadcast side of a broadcast join wrapped in ``F.broadcast``; a broadcast join
chained to its probe side reads the broadcast side from its own gate);
Union -> unionByName; Map/FlatMap/Filter(fn)/MapBatches(arrow) -> mapInArrow; MapBatches(pandas)
-> mapInPandas; KeyedProcess/KeyedReduce -> groupBy(keys).applyInArrow (``python_ops``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.operators import aggregation as A
from flintlock.runtime.operators import specs as S
from flintlock.runtime.operators.time_specs import TIME_SPECS
from flintlock.runtime.spark import python_ops as P
from flintlock.runtime.spark.connector_io import read_source
from flintlock.runtime.spark.errors import (
    OperatorException,
    describe_spark_error,
    is_analysis_error,
)
from flintlock.runtime.spark.partitions import GateRead, consumed_only
from flintlock.runtime.spark.schema import arrow_schema, ddl_field_types, parse_ddl

__all__ = ["TranslatedChain", "broadcast_head_join", "shared_nodes_to_cache", "translate_chain"]

_JOIN_HOW = {
    "inner": "inner", "left": "left", "right": "right", "full": "full", "outer": "full",
    "semi": "left_semi", "left_semi": "left_semi", "anti": "left_anti", "left_anti": "left_anti",
    "cross": "cross",
}


@dataclass
class TranslatedChain:
    """The DataFrames of a chain's nodes and where they go.

    Attributes:
        frames: DataFrame per node index.
        outputs: ``(output index, node index)`` for every non-chained output.
        sinks: ``(sink index, node index, sink object)``; sink index = position among the chain's
            ``SinkSpec`` nodes (the order of ``JobVertex.sinks``).
        records_in, bytes_in: what the head reads (0 when unknown).
    """

    frames: list[Any] = field(default_factory=list)
    outputs: list[tuple[int, int]] = field(default_factory=list)
    sinks: list[tuple[int, int, Any]] = field(default_factory=list)
    records_in: int = 0
    bytes_in: int = 0


#: Operators whose recomputation costs about as much as reading a cached copy (measured: a
#: filtered, projected scan written twice took 3.0-3.7 s CPU either way; an aggregation's output
#: written twice 3.8-6.8 s recomputed vs 3.0-4.1 s cached).
_CHEAP = (S.SourceSpec, S.SelectSpec, S.FilterSpec, S.WithColumnSpec, S.DropSpec, S.LimitSpec,
          S.UnionSpec, S.SinkSpec)


def shared_nodes_to_cache(chain: S.OperatorChain, actions: list[int]) -> list[int]:
    """Nodes whose DataFrame several actions (outputs, sinks) share and that are worth caching.

    Each output and sink of a subtask is one Spark action over its own plan, so an operator that
    feeds several of them would run once per action. Returned: every node where the chain tree
    branches towards two or more of ``actions`` (node indices, repeats allowed) and whose path from
    the head contains an operator other than ``_CHEAP`` ones; the caller persists those
    DataFrames for the duration of the task.
    """
    uses = [0] * len(chain.nodes)
    for a in actions:
        n: int | None = a
        while n is not None:
            uses[n] += 1
            n = chain.nodes[n].chained_input
    children: dict[int, list[int]] = {}
    for i, node in enumerate(chain.nodes):
        if node.chained_input is not None:
            children.setdefault(node.chained_input, []).append(i)
    out = []
    for i in range(len(chain.nodes)):
        if uses[i] < 2 or any(uses[c] == uses[i] for c in children.get(i, ())):
            continue
        m: int | None = i
        expensive = False
        while m is not None:
            node = chain.nodes[m]
            expensive = expensive or not isinstance(node.spec, _CHEAP) or len(node.gate_inputs) > 1
            m = node.chained_input
        if expensive:
            out.append(i)
    return out


def operator_error(vertex: str, node: S.ChainedNode, exc: BaseException) -> OperatorException:
    """``Operator '<name>' of vertex '<vertex>': <cause>``; analysis errors are non-recoverable."""
    nr = bool(getattr(exc, "non_recoverable", False)) or is_analysis_error(exc)
    cause = str(exc) if isinstance(exc, OperatorException) else describe_spark_error(exc)
    return OperatorException(
        f"Operator '{node.name}' of vertex '{vertex}': {cause}", non_recoverable=nr,
        error_class=type(exc).__name__,
    )


def translate_chain(
    spark: Any,
    chain: S.OperatorChain,
    *,
    vertex_name: str,
    source_splits: tuple[Any, ...],
    read_gate: Callable[[int], GateRead],
    timed: Any = None,
) -> TranslatedChain:
    """Build the DataFrames of ``chain``.

    Args:
        spark: the Spark Connect session.
        chain: the vertex's operator chain.
        vertex_name: for error messages.
        source_splits: this subtask's splits (source heads).
        read_gate: gate index -> its ``GateRead`` (DataFrame, rows, bytes, DDL schema).
        timed: the task's ``TimedOperators`` (event time, windows, keyed state); a BATCH one
            (no state, watermark at its maximum) is made when a chain needs one and none is given.

    Raises:
        OperatorException: naming the operator (non-recoverable for analysis errors and functions
            that cannot be unpickled).
        PartitionNotFoundException: from ``read_gate``.
    """
    out = TranslatedChain()
    sink_count = 0
    if timed is None and any(isinstance(n.spec, TIME_SPECS) for n in chain.nodes):
        from flintlock.runtime.spark.timed_operators import TimedOperators

        timed = TimedOperators(spark, None, streaming=False)
        timed.begin_epoch(None, 0)
    for index, node in enumerate(chain.nodes):
        where = f"Operator '{node.name}' of vertex '{vertex_name}'"

        def apply(df: Any, spec: Any, index: int = index, node: S.ChainedNode = node,
                  where: str = where) -> Any:
            if isinstance(spec, TIME_SPECS):
                return timed.apply(index, node, df, where)
            return _apply(spark, df, spec, where)

        try:
            if node.chained_input is None:
                df = _head(spark, node, source_splits, read_gate, out, where, apply)
            elif node.gate_inputs:
                df = _chained_join(out.frames[node.chained_input], node, read_gate, out, where)
            else:
                df = apply(out.frames[node.chained_input], node.spec)
        except OperatorException:
            raise
        except Exception as exc:
            if _is_spark_error(exc):
                raise operator_error(vertex_name, node, exc) from exc
            raise
        out.frames.append(df)
        if isinstance(node.spec, S.SinkSpec):
            out.sinks.append((sink_count, index, node.spec.sink))
            sink_count += 1
        for o in node.outputs:
            out.outputs.append((o, index))
    return out


def broadcast_head_join(chain: S.OperatorChain, side: str, vertex_name: str) -> S.OperatorChain:
    """``chain`` with its head hash join turned into a broadcast join of ``side`` (the
    AdaptiveBatchScheduler's adaptive broadcast join, ``TaskDeploymentDescriptor
    .broadcast_join_side``; the gate of that side then reads it whole).

    Raises:
        OperatorException: (non-recoverable) the head is not a hash join, or its join type
            cannot broadcast ``side``.
    """
    head = chain.head()
    spec = head.spec
    allowed = S.BROADCAST_RIGHT_JOINS if side == "right" else S.BROADCAST_LEFT_JOINS
    if not isinstance(spec, S.JoinSpec) or spec.broadcast or side not in ("left", "right") \
            or spec.how.lower() not in allowed:
        raise OperatorException(
            f"vertex '{vertex_name}' was deployed to broadcast the {side!r} side of its head "
            f"join, but its head is {head.name!r} ({type(spec).__name__}"
            f"{' ' + spec.how if isinstance(spec, S.JoinSpec) else ''})", non_recoverable=True)
    node = dataclasses.replace(head, spec=dataclasses.replace(spec, broadcast=side))
    return dataclasses.replace(chain, nodes=(node, *chain.nodes[1:]))


def _is_spark_error(exc: BaseException) -> bool:
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, PySparkException)


def _head(spark: Any, node: S.ChainedNode, splits: tuple[Any, ...],
          read_gate: Callable[[int], GateRead], out: TranslatedChain, where: str,
          apply: Callable[[Any, Any], Any]) -> Any:
    spec = node.spec
    if isinstance(spec, S.SourceSpec):
        read = read_source(spark, spec.source, splits)
        out.records_in += read.records
        out.bytes_in += read.bytes
        return read.df
    gates = []
    schema = ""
    for g in node.gate_inputs:
        gate = read_gate(g)
        if gate.df is None:  # a streaming gate with nothing yet and no known schema
            continue
        gates.append(gate.df)
        schema = schema or gate.schema
        out.records_in += gate.rows
        out.bytes_in += gate.bytes
    if isinstance(spec, S.JoinSpec):
        if len(gates) != 2:
            raise OperatorException(f"{where}: a join needs 2 input gates, got {len(gates)}",
                                    non_recoverable=True)
        return _join(gates[0], gates[1], spec, where)
    if not gates:
        raise OperatorException(f"{where}: chain head without source or input gates",
                                non_recoverable=True)
    df = functools.reduce(lambda a, b: a.unionByName(b), gates)
    if isinstance(spec, S.UnionSpec):
        return df
    if isinstance(spec, S.MergeAggregateSpec):
        return _merge_aggregate(df, spec, schema)
    return apply(df, spec)


def _chained_join(probe: Any, node: S.ChainedNode, read_gate: Callable[[int], GateRead],
                  out: TranslatedChain, where: str) -> Any:
    """A broadcast join chained to its probe side: the broadcast side comes from a gate."""
    spec = node.spec
    if not isinstance(spec, S.JoinSpec) or spec.broadcast not in ("left", "right") \
            or len(node.gate_inputs) != 1:
        raise OperatorException(f"{where}: only a broadcast join reads an input gate when chained",
                                non_recoverable=True)
    read = read_gate(node.gate_inputs[0])
    build = read.df
    out.records_in += read.rows
    out.bytes_in += read.bytes
    if spec.broadcast == "right":
        return _join(probe, build, spec, where)
    return _join(build, probe, spec, where)


def _join(left: Any, right: Any, spec: S.JoinSpec, where: str) -> Any:
    from pyspark.sql import functions as F

    if spec.broadcast == "right":
        right = F.broadcast(right)
    elif spec.broadcast == "left":
        left = F.broadcast(left)
    how = _JOIN_HOW.get(spec.how.lower())
    if how is None:
        raise OperatorException(f"{where}: unknown join type {spec.how!r}", non_recoverable=True)
    if how == "cross":
        if spec.left_on or spec.right_on:
            raise OperatorException(f"{where}: a cross join has no keys", non_recoverable=True)
        return left.crossJoin(right)
    if len(spec.left_on) != len(spec.right_on) or not spec.left_on:
        raise OperatorException(
            f"{where}: join keys {spec.left_on} and {spec.right_on} do not pair up",
            non_recoverable=True,
        )
    if tuple(spec.left_on) == tuple(spec.right_on):
        return left.join(right, on=list(spec.left_on), how=how)
    cond = functools.reduce(
        lambda a, b: a & b, [left[lk] == right[rk] for lk, rk in zip(spec.left_on, spec.right_on, strict=False)]
    )
    return left.join(right, on=cond, how=how)


def _group(df: Any, keys: tuple[str, ...], columns: list[Any]) -> Any:
    return df.groupBy(*keys).agg(*columns) if keys else df.agg(*columns)


def _local_aggregate(df: Any, spec: S.LocalAggregateSpec) -> Any:
    """Partial rows per key; the rows unchanged when the types allow no exact split."""
    plan, _ = A.plan_two_phase(spec.aggregates)
    if plan is None:
        return df
    avg = A.avg_arguments(plan)
    types: dict[int, Any] = {}
    if avg:  # one analysis round trip: the argument types decide how avg is split
        fields = df.select(*[col for _, col in avg]).schema.fields
        types = {call.index: f.dataType for (call, _), f in zip(avg, fields, strict=True)}
    columns = A.local_columns(plan, types)
    return df if columns is None else _group(df, spec.keys, columns)


def _merge_aggregate(df: Any, spec: S.MergeAggregateSpec, schema: str = "") -> Any:
    """Merge partial rows (or aggregate raw rows that the local phase passed on).

    ``schema``: the input's DDL (from the gates; one analysis round trip when empty).
    """
    plan, _ = A.plan_two_phase(spec.aggregates)
    columns = None
    if plan is not None:
        if schema:
            types = ddl_field_types(schema)
        else:
            types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        columns = A.merge_columns(plan, types)
    return _group(df, spec.keys, list(spec.aggregates) if columns is None else columns)


def _struct(spark: Any, ddl: str) -> Any:
    return parse_ddl(spark, ddl)


def _apply(spark: Any, df: Any, spec: Any, where: str) -> Any:
    if isinstance(spec, S.SelectSpec):
        return df.select(*spec.columns)
    if isinstance(spec, S.FilterSpec):
        return df.filter(spec.condition)
    if isinstance(spec, S.WithColumnSpec):
        return df.withColumn(spec.name, spec.column)
    if isinstance(spec, S.DropSpec):
        return df.drop(*spec.names)
    if isinstance(spec, S.MapSpec):
        P.check_loadable(spec.fn, where)
        struct = _struct(spark, spec.output_schema)
        return df.mapInArrow(P.map_fn(spec.fn, arrow_schema(struct)), struct)
    if isinstance(spec, S.FlatMapSpec):
        P.check_loadable(spec.fn, where)
        struct = _struct(spark, spec.output_schema)
        return df.mapInArrow(P.flat_map_fn(spec.fn, arrow_schema(struct)), struct)
    if isinstance(spec, S.FilterFunctionSpec):
        P.check_loadable(spec.fn, where)
        return df.mapInArrow(P.filter_fn(spec.fn), df.schema)
    if isinstance(spec, S.MapBatchesSpec):
        P.check_loadable(spec.fn, where)
        struct = _struct(spark, spec.output_schema)
        if spec.batch_format == "pandas":
            return df.mapInPandas(P.map_batches_fn(spec.fn), struct)
        return df.mapInArrow(P.map_batches_fn(spec.fn), struct)
    if isinstance(spec, S.KeyedAggregateSpec):
        return df.groupBy(*spec.keys).agg(*spec.aggregates)
    if isinstance(spec, S.KeyedReduceSpec):
        P.check_loadable(spec.fn, where)
        return df.groupBy(*spec.keys).applyInArrow(P.reduce_fn(spec.fn), df.schema)
    if isinstance(spec, S.KeyedProcessSpec):
        P.check_loadable(spec.fn, where)
        struct = _struct(spark, spec.output_schema)
        return df.groupBy(*spec.keys).applyInArrow(P.process_fn(spec.fn, arrow_schema(struct)), struct)
    if isinstance(spec, S.GlobalAggregateSpec):
        return df.agg(*spec.aggregates)
    if isinstance(spec, S.LocalAggregateSpec):
        return _local_aggregate(df, spec)
    if isinstance(spec, S.MergeAggregateSpec):
        return _merge_aggregate(df, spec)
    if isinstance(spec, S.DistinctSpec):
        return df.distinct()
    if isinstance(spec, S.SortSpec):
        return df.orderBy(*spec.columns)
    if isinstance(spec, S.LimitSpec):
        return df.limit(int(spec.n))
    if isinstance(spec, S.ConsumedColumnsSpec):
        return consumed_only(df, spec.columns)
    if isinstance(spec, S.SinkSpec):
        return df
    if isinstance(spec, (S.JoinSpec, S.UnionSpec, S.SourceSpec)):
        raise OperatorException(f"{where}: {type(spec).__name__} can only be a chain head",
                                non_recoverable=True)
    raise OperatorException(f"{where}: unsupported operator spec {type(spec).__name__}",
                            non_recoverable=True)
