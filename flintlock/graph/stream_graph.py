"""StreamGraph: one node per operator, one edge per data connection (before chaining).

Shapes:
- ``StreamGraph.nodes`` are sorted by ``id``; ids start at 1 and every edge goes from a lower to a
  higher id (the generator creates a node after its inputs), so ascending id is a topological order.
- ``StreamEdge.type_number`` is the input index of the target (gate index of a multi-input operator:
  0 = left of a join, 0..N-1 for a union); single-input operators have ``type_number`` 0.
- ``StreamEdge.key_columns`` are set for HASH edges only; ``()`` on a HASH edge means "all columns".

Follows Flink ``streaming/api/graph/{StreamGraph,StreamNode,StreamEdge}`` and
``streaming/api/operators/ChainingStrategy`` (fact sheet sections 2-3).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from flintlock.runtime.ids import OperatorID
from flintlock.runtime.jobgraph.types import JobType, ShipStrategy
from flintlock.runtime.operators.specs import SinkSpec, SourceSpec

__all__ = [
    "DEFAULT_SLOT_SHARING_GROUP",
    "ChainingStrategy",
    "StreamEdge",
    "StreamGraph",
    "StreamNode",
    "default_max_parallelism",
]

#: Flink ``StreamGraphGenerator.DEFAULT_SLOT_SHARING_GROUP``.
DEFAULT_SLOT_SHARING_GROUP = "default"

_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
_UPPER_BOUND_MAX_PARALLELISM = 1 << 15


def default_max_parallelism(parallelism: int) -> int:
    """Flink's derived max parallelism: ``roundUpPowerOfTwo(p + p/2)`` clamped to [128, 32768].

    Follows ``runtime/state/KeyGroupRangeAssignment.computeDefaultMaxParallelism``.
    """
    wanted = parallelism + parallelism // 2
    power = 1 << max(wanted - 1, 0).bit_length()
    return min(max(power, _LOWER_BOUND_MAX_PARALLELISM), _UPPER_BOUND_MAX_PARALLELISM)


class ChainingStrategy(enum.Enum):
    """Whether an operator may be chained to its predecessor / successors (Flink enum).

    ALWAYS: chain on both sides where the rules allow (the default). HEAD: never chain to the
    predecessor (``start_new_chain()``), successors may chain. NEVER: no chaining on either side
    (``disable_chaining()``).
    """

    ALWAYS = "ALWAYS"
    HEAD = "HEAD"
    NEVER = "NEVER"


@dataclass(frozen=True)
class StreamNode:
    """One operator of the program.

    Attributes:
        id: int id, unique in the graph, ascending in topological order.
        name: display name (``"Filter"``, ``"Source: Parquet: /data"`` or the user's name).
        operator_id: OperatorID (md5 of the uid when a uid is given).
        spec: the operator's ``flintlock.runtime.operators.specs`` descriptor.
        parallelism: number of subtasks (>= 1).
        max_parallelism: number of key groups (>= parallelism).
        slot_sharing_group: slot sharing group name.
        chaining_strategy: see ``ChainingStrategy``.
        uid: the user's stable id, if any.
        parallelism_configured: the program set it (``set_parallelism``, or a non-parallel
            operator); otherwise it is the job's default and the AdaptiveBatchScheduler may
            decide it at run time.
    """

    id: int
    name: str
    operator_id: OperatorID
    spec: Any
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str = DEFAULT_SLOT_SHARING_GROUP
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    uid: str | None = None
    parallelism_configured: bool = True

    @property
    def pact(self) -> str:
        """Flink's plan JSON node kind: ``Data Source``, ``Data Sink`` or ``Operator``."""
        if isinstance(self.spec, SourceSpec):
            return "Data Source"
        if isinstance(self.spec, SinkSpec):
            return "Data Sink"
        return "Operator"


@dataclass(frozen=True)
class StreamEdge:
    """A connection ``source_id -> target_id`` (input ``type_number`` of the target)."""

    source_id: int
    target_id: int
    partitioner: ShipStrategy
    key_columns: tuple[str, ...] = ()
    type_number: int = 0


@dataclass(frozen=True)
class StreamGraph:
    """The program's operators and connections plus job-level settings.

    Attributes:
        job_name: the job's name.
        job_type: BATCH or STREAMING.
        nodes: all nodes, sorted by id.
        edges: all edges.
        chaining_enabled: ``pipeline.operator-chaining.enabled``.
        configuration: the job's effective settings (Flink keys -> strings).
        slot_sharing_group_resources: slot sharing group -> the ``ResourceProfile`` of its slots
            (groups declared with resources; the others ask for default slots).
    """

    job_name: str
    job_type: JobType
    nodes: tuple[StreamNode, ...]
    edges: tuple[StreamEdge, ...]
    chaining_enabled: bool = True
    configuration: Mapping[str, str] = field(default_factory=dict)
    slot_sharing_group_resources: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"stream graph {self.job_name!r}: duplicate node ids {ids}")
        known = set(ids)
        for e in self.edges:
            if e.source_id not in known or e.target_id not in known:
                raise ValueError(f"stream graph {self.job_name!r}: edge {e} names an unknown node")

    @cached_property
    def _by_id(self) -> dict[int, StreamNode]:
        return {n.id: n for n in self.nodes}

    @cached_property
    def _in(self) -> dict[int, tuple[StreamEdge, ...]]:
        out: dict[int, list[StreamEdge]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            out[e.target_id].append(e)
        return {k: tuple(sorted(v, key=lambda e: e.type_number)) for k, v in out.items()}

    @cached_property
    def _out(self) -> dict[int, tuple[StreamEdge, ...]]:
        out: dict[int, list[StreamEdge]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            out[e.source_id].append(e)
        return {k: tuple(v) for k, v in out.items()}

    def node(self, node_id: int) -> StreamNode:
        """The node with ``node_id``; raises ``KeyError`` when there is none."""
        return self._by_id[node_id]

    def in_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        """The node's input edges, ordered by ``type_number``."""
        return self._in[node_id]

    def out_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        """The node's output edges, in creation order."""
        return self._out[node_id]

    def source_ids(self) -> tuple[int, ...]:
        """Ids of the nodes without inputs."""
        return tuple(n.id for n in self.nodes if not self._in[n.id])
