"""Operator descriptors: what one JobVertex's operator chain does, as pure data.

The client compiles user calls into these frozen dataclasses; the JobGraph carries the chain of one
JobVertex as an ``OperatorChain`` (cloudpickled, opaque to the control plane); inside a Task thread
``flintlock.runtime.spark`` turns the chain into one DataFrame plan. Nothing here imports pyspark:
Column expressions are stored as they are (Spark Connect Columns are pure-Python expression trees) and
user functions as ``SerializedFunction`` blobs.

Shapes:
- ``ColumnLike`` = a Spark Connect ``Column`` (SQL strings are converted with ``F.expr`` by the API).
- Schemas are Spark DDL strings (``"word string, n bigint"``).
- Chain topology: ``OperatorChain.nodes`` are in topological order. Node 0 is the chain head; it reads
  the vertex's input gates (``gate_inputs``, in order) or, for a source, its splits. Every other node has
  exactly one ``chained_input`` (Flink's isChainable rule: downstream has one input); a chained
  broadcast join also reads its broadcast side from ``gate_inputs``. A node's result
  may feed chained successors, vertex outputs (``outputs``: indices into ``OperatorChain.outputs``) and
  be consumed by a sink node.

Follows Flink's ``StreamConfig``/``OperatorChain`` (runtime/tasks/OperatorChain.java): the chain of one
task, with chained outputs and non-chained (network) outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from flintlock.runtime.ids import IntermediateDataSetID, OperatorID
from flintlock.runtime.jobgraph.types import ShipStrategy

__all__ = [
    "BROADCAST_LEFT_JOINS",
    "BROADCAST_RIGHT_JOINS",
    "REDUCIBLE_SIDES",
    "probe_side_cut",
    "ConsumedColumnsSpec",
    "DistinctSpec",
    "DropSpec",
    "FilterFunctionSpec",
    "FilterSpec",
    "FlatMapSpec",
    "GlobalAggregateSpec",
    "JoinSpec",
    "KeyedAggregateSpec",
    "KeyedProcessSpec",
    "KeyedReduceSpec",
    "LimitSpec",
    "LocalAggregateSpec",
    "MapBatchesSpec",
    "MergeAggregateSpec",
    "MapSpec",
    "OperatorChain",
    "OperatorSpec",
    "OutputSpec",
    "SelectSpec",
    "SerializedFunction",
    "SinkSpec",
    "SortSpec",
    "SourceSpec",
    "ChainedNode",
    "UnionSpec",
    "WithColumnSpec",
]


@dataclass(frozen=True)
class SerializedFunction:
    """A user function pickled with cloudpickle in the client; unpickled only inside a Task.

    ``name`` is the function's qualified name, used in error messages.
    """

    name: str
    payload: bytes


# ---- sources (chain heads without inputs) ----------------------------------------------------


@dataclass(frozen=True)
class SourceSpec:
    """A chain head that reads the splits the JobMaster assigned to this subtask.

    ``source`` is a ``flintlock.connectors`` source object (FileSource, CollectionSource,
    SequenceSource): it enumerates splits on the JobMaster (``enumerate_splits``) and is read by
    ``flintlock.runtime.spark`` in the Task.
    """

    source: Any


# ---- one-input operators -----------------------------------------------------------------------


@dataclass(frozen=True)
class SelectSpec:
    columns: tuple[Any, ...]


@dataclass(frozen=True)
class FilterSpec:
    condition: Any


@dataclass(frozen=True)
class FilterFunctionSpec:
    """Keep the rows for which ``fn(row)`` is truthy (Arrow-based Python execution)."""

    fn: SerializedFunction


@dataclass(frozen=True)
class WithColumnSpec:
    name: str
    column: Any


@dataclass(frozen=True)
class DropSpec:
    names: tuple[str, ...]


@dataclass(frozen=True)
class MapSpec:
    """``fn(row) -> tuple | dict | Row`` per row; output schema as a DDL string."""

    fn: SerializedFunction
    output_schema: str


@dataclass(frozen=True)
class FlatMapSpec:
    """``fn(row) -> iterable of tuple | dict | Row``; output schema as a DDL string."""

    fn: SerializedFunction
    output_schema: str


@dataclass(frozen=True)
class MapBatchesSpec:
    """``fn(batch) -> batch`` where batch is a pyarrow RecordBatch or a pandas DataFrame."""

    fn: SerializedFunction
    output_schema: str
    batch_format: Literal["arrow", "pandas"] = "arrow"


@dataclass(frozen=True)
class KeyedAggregateSpec:
    """``groupBy(keys).agg(*aggregates)`` on the key range this subtask received by HASH."""

    keys: tuple[str, ...]
    aggregates: tuple[Any, ...]


@dataclass(frozen=True)
class KeyedReduceSpec:
    """Fold the rows of each key with ``fn(acc_row, row) -> row`` (same schema as the input)."""

    keys: tuple[str, ...]
    fn: SerializedFunction


@dataclass(frozen=True)
class KeyedProcessSpec:
    """``fn(key, rows) -> iterable of rows`` over all rows of one key (applyInArrow/Pandas)."""

    keys: tuple[str, ...]
    fn: SerializedFunction
    output_schema: str


@dataclass(frozen=True)
class GlobalAggregateSpec:
    """``df.agg(*aggregates)``: one row; runs at parallelism 1 after a GLOBAL edge."""

    aggregates: tuple[Any, ...]


@dataclass(frozen=True)
class LocalAggregateSpec:
    """The local phase of a two-phase aggregation (Flink ``LocalGroupAggregate``).

    Chained before a HASH (``keys``) or GLOBAL (no keys) exchange: computes one partial row per key
    of this subtask's input (``flintlock.runtime.operators.aggregation.local_columns``), so only
    partial rows cross the exchange. ``aggregates`` are the user's original Columns.
    """

    keys: tuple[str, ...]
    aggregates: tuple[Any, ...]


@dataclass(frozen=True)
class MergeAggregateSpec:
    """The global phase of a two-phase aggregation (Flink ``GlobalGroupAggregate``).

    Merges the partial rows of each key (``aggregation.merge_columns``) into the same columns,
    names and types a one-phase ``groupBy(keys).agg(*aggregates)`` (``df.agg`` without keys) gives.
    """

    keys: tuple[str, ...]
    aggregates: tuple[Any, ...]


@dataclass(frozen=True)
class DistinctSpec:
    """Drop duplicate rows (inputs arrive HASH-partitioned on all columns)."""


@dataclass(frozen=True)
class SortSpec:
    """Order rows by ``columns`` (names or Columns such as ``F.col("n").desc()``)."""

    columns: tuple[Any, ...]


@dataclass(frozen=True)
class LimitSpec:
    n: int


@dataclass(frozen=True)
class ConsumedColumnsSpec:
    """Keep the columns an exchange to the next vertex would carry (``OutputSpec.columns``,
    lower-case names; None: all), in the input's column order (``partitions.consumed_only``).
    Put in front of a join the AdaptiveBatchScheduler moved into its probe side's producer, so
    the join sees the columns it would have read from the exchange."""

    columns: tuple[str, ...] | None


# ---- multi-input operators (only ever a chain head) --------------------------------------------


#: Join types (``JoinSpec.how``) that may broadcast their right / left side (as Spark's
#: broadcast hash join: the non-broadcast side must be the one whose unmatched rows are kept).
BROADCAST_RIGHT_JOINS = frozenset({"inner", "left", "semi", "anti", "cross"})
BROADCAST_LEFT_JOINS = frozenset({"inner", "right", "cross"})
#: Join type (``JoinSpec.how``) -> the sides that may be cut to the rows whose keys the other
#: side has (a semi join) before the join: a semi or anti join's right side, which only tells
#: whether a left key has a partner. (An outer join drops the other side's unmatched rows too,
#: but its kept side is usually a whole dimension whose keys cover the other side, so the cut
#: would cost a broadcast and keep every row, as with TPC-H Q13's customers and orders.)
REDUCIBLE_SIDES = {"semi": ("right",), "anti": ("right",)}


def probe_side_cut(how: str, probe_side: str, runtime_filter: bool) -> bool | None:
    """What a hash join of type ``how`` lets its ``probe_side`` (``"left"``/``"right"``)
    producer do once the other side is known small: False, run the join (the type may
    broadcast the other side); True, only cut its rows to the other side's keys (the runtime
    filter, ``runtime_filter`` on; ``REDUCIBLE_SIDES``); None, neither (cross joins never)."""
    if how == "cross":
        return None
    if how in (BROADCAST_RIGHT_JOINS if probe_side == "left" else BROADCAST_LEFT_JOINS):
        return False
    return True if runtime_filter and probe_side in REDUCIBLE_SIDES.get(how, ()) else None


@dataclass(frozen=True)
class JoinSpec:
    """Join gate 0 (left) with gate 1 (right). ``how``: inner, left, right, full, semi, anti, cross.

    When ``left_on == right_on`` the key columns appear once in the output (Spark's ``on=[...]``);
    otherwise both sides' key columns are kept. A ``cross`` join (``crossJoin``) has no keys and
    is always a broadcast join.

    ``broadcast``: ``"right"`` or ``"left"`` for a broadcast join (that side arrives over a
    BROADCAST edge and is broadcast inside Spark too; the other, the probe side, keeps its
    partitioning and may be chained: the join is then a non-head node of its probe side's chain,
    its ``chained_input`` the probe side and its one ``gate_inputs`` entry the broadcast side);
    ``""`` for a hash join (both sides HASH-partitioned on their keys).

    ``probe``: for a hash join, the side the planner estimates to be the large one (``"left"``
    or ``"right"``; ``""`` when it cannot tell). The AdaptiveBatchScheduler runs that side's
    producer after the other side and, when the other side turns out small, chains the join
    into it as a broadcast join (``JobVertex.adaptive_join_probe``). ``probe_bytes``: that
    side's estimated bytes (uncompressed rows; 0 without a probe side).
    """

    how: str
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    broadcast: str = ""
    probe: str = ""
    probe_bytes: int = 0


@dataclass(frozen=True)
class UnionSpec:
    """Union of all input gates by column name (``unionByName``)."""


# ---- sinks (chain ends) ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkSpec:
    """A chain end that writes its input to ``sink`` (a ``flintlock.connectors`` sink object)."""

    sink: Any


OperatorSpec = (
    SourceSpec
    | SelectSpec
    | FilterSpec
    | FilterFunctionSpec
    | WithColumnSpec
    | DropSpec
    | MapSpec
    | FlatMapSpec
    | MapBatchesSpec
    | KeyedAggregateSpec
    | KeyedReduceSpec
    | KeyedProcessSpec
    | GlobalAggregateSpec
    | LocalAggregateSpec
    | MergeAggregateSpec
    | DistinctSpec
    | SortSpec
    | LimitSpec
    | ConsumedColumnsSpec
    | JoinSpec
    | UnionSpec
    | SinkSpec
)


@dataclass(frozen=True)
class ChainedNode:
    """One operator of a chain with its wiring inside the chain.

    Attributes:
        operator_id: the StreamNode's OperatorID.
        name: display name (``"Filter"``, or the user's ``.name(...)``).
        spec: what it does.
        gate_inputs: input gate indices it reads (only the chain head; empty for a source).
        chained_input: index of the node in this chain that feeds it (``None`` for the head).
        outputs: indices into ``OperatorChain.outputs`` that are written from its result.
    """

    operator_id: OperatorID
    name: str
    spec: OperatorSpec
    gate_inputs: tuple[int, ...] = ()
    chained_input: int | None = None
    outputs: tuple[int, ...] = ()


@dataclass(frozen=True)
class OutputSpec:
    """A non-chained output of the vertex: one IntermediateDataSet and its partitioner.

    ``key_columns`` are set for HASH; the number of subpartitions comes with the deployment.
    ``columns``: the (lower-case) column names the consumer reads (``graph.column_pruning``); the
    producer writes only those of its columns, all of them when None.
    """

    dataset_id: IntermediateDataSetID
    ship_strategy: ShipStrategy
    key_columns: tuple[str, ...] = ()
    max_parallelism: int = 128
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class OperatorChain:
    """The operator chain of one JobVertex (see the module docstring for the wiring)."""

    nodes: tuple[ChainedNode, ...]
    outputs: tuple[OutputSpec, ...] = field(default=())

    def head(self) -> ChainedNode:
        return self.nodes[0]
