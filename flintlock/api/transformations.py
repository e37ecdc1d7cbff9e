"""Transformations: what the DataStream API records, before any graph is built (pure data).

A ``Transformation`` is one logical step of the program. Like Flink's, it is mutable while the
program is being written (``.name()``, ``.uid()``, ``.set_parallelism()`` change it in place) and is
read by ``flintlock.graph.stream_graph_generator`` when the job is compiled.

Shapes:
- ``parallelism is None`` means "the environment's default parallelism at compile time".
- ``PartitionTransformation`` is virtual: it creates no operator, it sets the partitioner of the
  edge(s) into the next operator (Flink's virtual partition nodes).
- ``OneInputTransformation.function`` is the raw user function; it is cloudpickled into the spec's
  ``fn`` at compile time, so the error for an unpicklable function names the final operator name.
- ``LimitTransformation`` expands into a local limit plus a parallelism-1 global limit (or one
  limit when its input already runs with parallelism 1).

Follows Flink ``api/dag/Transformation`` and ``streaming/api/transformations/*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flintlock.graph.stream_graph import ChainingStrategy
from flintlock.runtime.jobgraph.types import ShipStrategy

__all__ = [
    "LimitTransformation",
    "MultiInputTransformation",
    "OneInputTransformation",
    "PartitionTransformation",
    "SinkTransformation",
    "SourceTransformation",
    "Transformation",
]


@dataclass(eq=False, kw_only=True)
class Transformation:
    """One step of the program (compared by identity).

    Attributes:
        id: unique per environment, ascending in creation order.
        name: the operator's display name.
        inputs: the upstream transformations, in input (gate) order.
        uid: stable user id; the OperatorID is derived from it.
        parallelism: explicit parallelism, or None for the default.
        max_parallelism: explicit max parallelism, or None for the default.
        slot_sharing_group: explicit group, or None to inherit from the inputs (else "default").
        slot_sharing_group_resources: the group's slot resources when it was given as a
            ``SlotSharingGroup`` with a ``ResourceSpec`` (fine-grained resources), else None.
        chaining_strategy: ALWAYS, HEAD (``start_new_chain``) or NEVER (``disable_chaining``).
        non_parallel: forced to parallelism 1 (global aggregate, sort, global limit).
    """

    id: int
    name: str
    inputs: tuple[Transformation, ...] = ()
    uid: str | None = None
    parallelism: int | None = None
    max_parallelism: int | None = None
    slot_sharing_group: str | None = None
    slot_sharing_group_resources: Any = None
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    non_parallel: bool = False

    @property
    def is_virtual(self) -> bool:
        """Whether this creates no operator (a partitioning)."""
        return False


@dataclass(eq=False, kw_only=True)
class SourceTransformation(Transformation):
    """A bounded source (a ``flintlock.connectors`` source object)."""

    source: Any


@dataclass(eq=False, kw_only=True)
class OneInputTransformation(Transformation):
    """A one-input operator described by ``spec``.

    ``function`` is the raw user function of a function operator (its spec holds a placeholder
    ``SerializedFunction`` with an empty payload until the generator pickles ``function``).
    """

    spec: Any
    function: Any = None


@dataclass(eq=False, kw_only=True)
class MultiInputTransformation(Transformation):
    """A join (two inputs: left, right) or a union (N inputs); ``inputs`` are in gate order."""

    spec: Any


@dataclass(eq=False, kw_only=True)
class PartitionTransformation(Transformation):
    """Sets the partitioner of the next edge (virtual).

    Attributes:
        ship_strategy: the partitioner.
        key_columns: HASH keys (``()`` = all columns).
        implicit: added by an operator rather than the user (sort, global aggregate, limit); an
            implicit GLOBAL edge from a parallelism-1 producer becomes FORWARD so it can chain.
    """

    ship_strategy: ShipStrategy
    key_columns: tuple[str, ...] = ()
    implicit: bool = False

    @property
    def is_virtual(self) -> bool:
        return True


@dataclass(eq=False, kw_only=True)
class LimitTransformation(Transformation):
    """Keep the first ``n`` rows: a local limit per subtask, then a global limit at parallelism 1."""

    n: int
    non_parallel: bool = True


@dataclass(eq=False, kw_only=True)
class SinkTransformation(Transformation):
    """Writes its input to ``sink`` (a ``flintlock.connectors`` sink object)."""

    sink: Any
