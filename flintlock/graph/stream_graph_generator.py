"""Transformations -> StreamGraph (one translation function per transformation kind).

Shapes: the generator walks back from the sinks (inputs first), so a node is always created after
its inputs and node ids (from 1) are a topological order. Operators that reach no sink are not
part of the graph. User functions are cloudpickled here into ``SerializedFunction``s.

Rules (Flink ``StreamGraphGenerator`` and ``StreamGraph.addEdgeInternal``, fact sheet 3.2-3.4):
- parallelism: the transformation's, else the environment default; non-parallel operators run 1;
  a sink without its own runs with its input's parallelism (it chains; sorted output stays whole).
- max parallelism: the transformation's, else ``pipeline.max-parallelism``, else derived from the
  parallelism (``default_max_parallelism``); non-parallel operators use 1.
- slot sharing group: the transformation's, else the inputs' common group, else ``"default"``.
- edge partitioner: the one set by a partitioning, else FORWARD for equal parallelism and
  REBALANCE otherwise; an explicit FORWARD across different parallelisms is an error.
- two-phase aggregation (``table.optimizer.agg-phase-strategy``, Flink's planner key): a keyed or
  global aggregation behind an exchange whose aggregates decompose
  (``flintlock.runtime.operators.aggregation``) becomes a local phase with the producer's
  parallelism, chained to it (``LocalKeyedAggregate`` / ``LocalAggregate``), and a global merge
  phase behind the exchange (``GlobalKeyedAggregate`` / ``GlobalAggregate``). AUTO does this when
  the local phase can chain; TWO_PHASE always; ONE_PHASE never.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flintlock.api.exceptions import InvalidProgramException
from flintlock.api.functions import function_name
from flintlock.api.transformations import (
    LimitTransformation,
    MultiInputTransformation,
    OneInputTransformation,
    PartitionTransformation,
    SinkTransformation,
    SourceTransformation,
    Transformation,
)
from flintlock.config.optimizer_options import (
    ADAPTIVE_BROADCAST_JOIN_STRATEGY,
    RUNTIME_FILTER_ENABLED,
)
from flintlock.config.options import AGG_PHASE_STRATEGY, BROADCAST_JOIN_THRESHOLD
from flintlock.graph.size_estimates import estimated_bytes
from flintlock.graph.stream_graph import (
    DEFAULT_SLOT_SHARING_GROUP,
    ChainingStrategy,
    StreamEdge,
    StreamGraph,
    StreamNode,
    default_max_parallelism,
)
from flintlock.graph.streaming import check_streaming_operators
from flintlock.graph.user_code import dumps_user_function
from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import OperatorID
from flintlock.runtime.jobgraph.types import JobType, ShipStrategy
from flintlock.runtime.operators.aggregation import plan_two_phase
from flintlock.runtime.operators.specs import (
    BROADCAST_LEFT_JOINS,
    BROADCAST_RIGHT_JOINS,
    GlobalAggregateSpec,
    JoinSpec,
    KeyedAggregateSpec,
    LimitSpec,
    LocalAggregateSpec,
    MergeAggregateSpec,
    SerializedFunction,
    SinkSpec,
    SourceSpec,
    probe_side_cut,
)
from flintlock.runtime.operators.time_specs import SideOutputSpec

__all__ = [
    "DEFAULT_BATCH_JOB_NAME",
    "DEFAULT_STREAMING_JOB_NAME",
    "StreamGraphSettings",
    "generate_stream_graph",
    "operator_id_from_uid",
    "resolve_job_type",
    "resolve_partitioner",
    "serialize_function",
]

#: Flink ``StreamGraphGenerator.DEFAULT_BATCH_JOB_NAME`` / ``DEFAULT_STREAMING_JOB_NAME``.
DEFAULT_BATCH_JOB_NAME = "Flink Batch Job"
DEFAULT_STREAMING_JOB_NAME = "Flink Streaming Job"


@dataclass(frozen=True)
class StreamGraphSettings:
    """Job-level inputs of the generator (resolved from the environment's configuration).

    Attributes:
        job_name: the job's name.
        default_parallelism: parallelism of operators without an explicit one (>= 1).
        max_parallelism: ``pipeline.max-parallelism``; -1 derives it per operator.
        chaining_enabled: ``pipeline.operator-chaining.enabled``.
        job_type: BATCH or STREAMING (see ``resolve_job_type``).
        configuration: the job's effective settings (Flink keys -> strings).
        slot_sharing_group_resources: groups registered with the environment -> their slot's
            ``ResourceProfile``.
    """

    job_name: str = DEFAULT_BATCH_JOB_NAME
    default_parallelism: int = 1
    max_parallelism: int = -1
    chaining_enabled: bool = True
    job_type: JobType = JobType.BATCH
    configuration: Mapping[str, str] = field(default_factory=dict)
    slot_sharing_group_resources: Mapping[str, ResourceProfile] = field(default_factory=dict)


def resolve_job_type(runtime_mode: str, all_sources_bounded: bool = True) -> JobType:
    """``execution.runtime-mode`` -> JobType (Flink's rule: AUTOMATIC is BATCH when all sources
    are bounded, else STREAMING).

    Raises:
        InvalidProgramException: BATCH with an unbounded source (Flink's message).
    """
    mode = runtime_mode.upper()
    if mode == "BATCH" and not all_sources_bounded:
        raise InvalidProgramException(
            "Detected an UNBOUNDED source with the 'execution.runtime-mode' set to 'BATCH'. This "
            "combination is not allowed, please set the 'execution.runtime-mode' to STREAMING or "
            "AUTOMATIC"
        )
    if mode == "BATCH" or (mode == "AUTOMATIC" and all_sources_bounded):
        return JobType.BATCH
    return JobType.STREAMING


def operator_id_from_uid(uid: str) -> OperatorID:
    """The OperatorID of an operator with a user-given uid: md5 of the uid, hex."""
    return OperatorID(hashlib.md5(uid.encode("utf-8")).hexdigest())


def serialize_function(fn: Any, operator_name: str) -> SerializedFunction:
    """Cloudpickle a user function.

    Raises:
        InvalidProgramException: the function cannot be pickled; names the function and operator.
    """
    if isinstance(fn, SerializedFunction):
        return fn
    name = function_name(fn)
    try:
        payload = dumps_user_function(fn)
    except Exception as exc:
        raise InvalidProgramException(
            f"Cannot serialize the function '{name}' of operator '{operator_name}': "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return SerializedFunction(name=name, payload=payload)


def resolve_partitioner(
    requested: ShipStrategy | None, up: StreamNode, down: StreamNode, *, implicit: bool = False
) -> ShipStrategy:
    """The partitioner of an edge ``up -> down`` (Flink ``StreamGraph.addEdgeInternal``).

    Raises:
        InvalidProgramException: explicit FORWARD between different parallelisms.
    """
    if requested is None:
        return ShipStrategy.FORWARD if up.parallelism == down.parallelism else ShipStrategy.REBALANCE
    if implicit and requested is ShipStrategy.GLOBAL and up.parallelism == 1 == down.parallelism:
        return ShipStrategy.FORWARD
    if requested is ShipStrategy.FORWARD and up.parallelism != down.parallelism:
        raise InvalidProgramException(
            "Forward partitioning does not allow change of parallelism. Upstream operation: "
            f"{up.name} parallelism: {up.parallelism}, downstream operation: {down.name} "
            f"parallelism: {down.parallelism}. You must use another partitioning strategy, such "
            "as broadcast, rebalance, rescale or global."
        )
    return requested


@dataclass(frozen=True)
class _Ref:
    """An operator's output as seen by the next operator: node id plus a pending partitioning."""

    node_id: int
    partition: PartitionTransformation | None = None


class _Builder:
    def __init__(self, settings: StreamGraphSettings) -> None:
        self.settings = settings
        self.nodes: dict[int, StreamNode] = {}
        self.edges: list[StreamEdge] = []
        self.done: dict[int, _Ref] = {}
        self.uids: dict[str, str] = {}
        #: what size estimates read about each source node (``size_estimates.estimated_bytes``)
        self.source_facts: dict[int, Any] = {}
        #: slot sharing group -> its slot's resources (registered ones, then operators' own)
        self.group_resources: dict[str, ResourceProfile] = dict(settings.slot_sharing_group_resources)

    # ---- nodes and edges ----------------------------------------------------------------------

    def add_node(
        self,
        t: Transformation,
        spec: Any,
        inputs: Sequence[_Ref],
        *,
        parallelism: int | None = None,
        uid: str | None = None,
        name: str | None = None,
    ) -> _Ref:
        name = name or t.name
        uid = t.uid if uid is None else uid
        if parallelism is None:
            parallelism = 1 if t.non_parallel else (t.parallelism or self.settings.default_parallelism)
        if t.max_parallelism is not None:
            max_par = t.max_parallelism
        elif t.non_parallel and parallelism == 1:
            max_par = 1
        elif self.settings.max_parallelism > 0:
            max_par = self.settings.max_parallelism
        else:
            max_par = default_max_parallelism(parallelism)
        if max_par < parallelism:
            raise InvalidProgramException(
                f"The max parallelism {max_par} of operator '{name}' is below its parallelism "
                f"{parallelism}; raise the max parallelism or lower the parallelism."
            )
        if uid is not None:
            if uid in self.uids:
                raise InvalidProgramException(
                    f"Duplicate uid {uid!r} (operators '{self.uids[uid]}' and '{name}'): "
                    "uids must be unique within a job."
                )
            self.uids[uid] = name
            op_id = operator_id_from_uid(uid)
        else:
            op_id = OperatorID.generate()
        groups = {self.nodes[r.node_id].slot_sharing_group for r in inputs}
        ssg = t.slot_sharing_group or (
            groups.pop() if len(groups) == 1 else DEFAULT_SLOT_SHARING_GROUP
        )
        if t.slot_sharing_group_resources is not None:
            known = self.group_resources.setdefault(ssg, t.slot_sharing_group_resources)
            if known != t.slot_sharing_group_resources:
                raise InvalidProgramException(
                    f"Slot sharing group {ssg!r} is given two different resources ({known} and "
                    f"{t.slot_sharing_group_resources} at operator '{name}'); a group has one.")
        node = StreamNode(
            id=len(self.nodes) + 1,
            name=name,
            operator_id=op_id,
            spec=spec,
            parallelism=parallelism,
            max_parallelism=max_par,
            slot_sharing_group=ssg,
            chaining_strategy=t.chaining_strategy,
            uid=uid,
            parallelism_configured=t.non_parallel or t.parallelism is not None,
        )
        self.nodes[node.id] = node
        for type_number, ref in enumerate(inputs):
            self.add_edge(ref, node, type_number)
        return _Ref(node.id)

    def add_edge(self, ref: _Ref, down: StreamNode, type_number: int) -> None:
        up = self.nodes[ref.node_id]
        p = ref.partition
        requested = p.ship_strategy if p is not None else None
        strategy = resolve_partitioner(requested, up, down, implicit=p is not None and p.implicit)
        keys = p.key_columns if p is not None and strategy is ShipStrategy.HASH else ()
        self.edges.append(StreamEdge(up.id, down.id, strategy, keys, type_number))

    # ---- translation ----------------------------------------------------------------------------

    def translate(self, t: Transformation) -> _Ref:
        if t.id in self.done:
            return self.done[t.id]
        ref = self._translate(t)
        self.done[t.id] = ref
        return ref

    def _translate(self, t: Transformation) -> _Ref:
        if isinstance(t, PartitionTransformation):
            return _Ref(self.translate(t.inputs[0]).node_id, t)
        if isinstance(t, SourceTransformation):
            return self.add_node(t, SourceSpec(t.source), ())
        if isinstance(t, LimitTransformation):
            return self._translate_limit(t)
        inputs = [self.translate(i) for i in t.inputs]
        if isinstance(t, OneInputTransformation) and self._splits_aggregation(t, inputs[0]):
            return self._translate_two_phase(t, inputs[0])
        if isinstance(t, OneInputTransformation):
            spec = t.spec
            if t.function is not None:
                spec = dataclasses.replace(spec, fn=serialize_function(t.function, t.name))
            if isinstance(spec, SideOutputSpec):  # virtual in Flink: chained to its operator
                up = self.nodes[inputs[0].node_id]
                return self.add_node(t, spec, inputs, parallelism=up.parallelism)
            return self.add_node(t, spec, inputs)
        if isinstance(t, MultiInputTransformation) and isinstance(t.spec, JoinSpec):
            return self._translate_join(t, inputs)
        if isinstance(t, MultiInputTransformation):
            return self.add_node(t, t.spec, inputs)
        if isinstance(t, SinkTransformation):
            # a sink runs with its input's parallelism unless set, so it chains to it
            par = t.parallelism or self.nodes[inputs[0].node_id].parallelism
            return self.add_node(t, SinkSpec(t.sink), inputs, parallelism=par)
        raise TypeError(f"unknown transformation {type(t).__name__}")

    def _translate_limit(self, t: LimitTransformation) -> _Ref:
        ref = self.translate(t.inputs[0])
        if self.nodes[ref.node_id].parallelism == 1 and ref.partition is None:
            return self.add_node(t, LimitSpec(t.n), [ref])
        up_par = self.nodes[ref.node_id].parallelism
        local = dataclasses.replace(
            t, uid=None, parallelism=up_par, max_parallelism=None, non_parallel=False,
            chaining_strategy=ChainingStrategy.ALWAYS, slot_sharing_group=None,
        )
        local_uid = f"{t.uid}-local" if t.uid else None
        local_ref = self.add_node(local, LimitSpec(t.n), [ref], uid=local_uid)
        to_global = PartitionTransformation(
            id=-t.id, name="Global", inputs=(), ship_strategy=ShipStrategy.GLOBAL, implicit=True
        )
        return self.add_node(t, LimitSpec(t.n), [_Ref(local_ref.node_id, to_global)])


    def _option(self, opt: Any) -> Any:
        """A planner option's value from the job configuration (validated by ``Configuration``)."""
        return opt.parse(self.settings.configuration.get(opt.key, opt.default))

    # ---- broadcast joins ------------------------------------------------------------------------

    def _translate_join(self, t: MultiInputTransformation, inputs: list[_Ref]) -> _Ref:
        """A hash join whose small side fits ``table.optimizer.join.broadcast-threshold``
        becomes a broadcast join: that side over a BROADCAST edge, the other side unpartitioned
        (so the join chains to it). Not with ``table.optimizer.adaptive-broadcast-join.strategy:
        RUNTIME_ONLY``, which leaves the decision to the AdaptiveBatchScheduler."""
        spec = t.spec
        side, probe, probe_bytes = ("", "", 0) if spec.broadcast else self._broadcast_side(spec, inputs)
        side = spec.broadcast or side
        if side and not spec.broadcast:
            build = 0 if side == "left" else 1
            to_all = PartitionTransformation(id=-t.id, name="Broadcast", inputs=(),
                                             ship_strategy=ShipStrategy.BROADCAST)
            inputs = [_Ref(r.node_id, to_all if i == build else None) for i, r in enumerate(inputs)]
            spec = dataclasses.replace(spec, broadcast=side)
        elif probe:
            spec = dataclasses.replace(spec, probe=probe, probe_bytes=probe_bytes)
        return self.add_node(t, spec, inputs)

    def _broadcast_side(self, spec: JoinSpec, inputs: list[_Ref]) -> tuple[str, str, int]:
        """(the side to broadcast now, ``JoinSpec.probe``, its estimated bytes) of a hash join
        over two HASH inputs.

        The probe hint names the side estimated above the threshold when the other side may
        be broadcast and is either estimated smaller or cannot be estimated (it is behind a
        join or an aggregation, as the small side of a star join usually is)."""
        threshold = int(self._option(BROADCAST_JOIN_THRESHOLD))
        if threshold < 0 or len(inputs) != 2:
            return "", "", 0
        if any(r.partition is None or r.partition.ship_strategy is not ShipStrategy.HASH
               for r in inputs):
            return "", "", 0
        sizes = [estimated_bytes(self.nodes, self.edges, r.node_id, self.source_facts)
                 for r in inputs]
        allowed = {"right": spec.how in BROADCAST_RIGHT_JOINS, "left": spec.how in BROADCAST_LEFT_JOINS}
        filters = bool(self._option(RUNTIME_FILTER_ENABLED))
        probes = [
            (mine, side) for mine, other, side in (
                (sizes[0], sizes[1], "left"), (sizes[1], sizes[0], "right"))
            if probe_side_cut(spec.how, side, filters) is not None
            and mine is not None and mine > threshold and (other is None or other < mine)
        ]
        probe_bytes, probe = max(probes) if probes else (0, "")
        if self._option(ADAPTIVE_BROADCAST_JOIN_STRATEGY) == "RUNTIME_ONLY":
            return "", probe, probe_bytes
        candidates = [
            (size, side) for size, side in ((sizes[1], "right"), (sizes[0], "left"))
            if size is not None and size <= threshold and allowed[side]
        ]
        return (min(candidates)[1], "", 0) if candidates else ("", probe, probe_bytes)

    # ---- two-phase aggregation ------------------------------------------------------------------

    def _splits_aggregation(self, t: OneInputTransformation, ref: _Ref) -> bool:
        """Whether ``t`` (an aggregation behind an exchange) runs as local + global phases."""
        spec = t.spec
        if not isinstance(spec, (KeyedAggregateSpec, GlobalAggregateSpec)) or ref.partition is None:
            return False
        strategy = self._option(AGG_PHASE_STRATEGY)
        if strategy == "ONE_PHASE":
            return False
        up = self.nodes[ref.node_id]
        parallelism = 1 if t.non_parallel else (t.parallelism or self.settings.default_parallelism)
        p = ref.partition
        if p.implicit and p.ship_strategy is ShipStrategy.GLOBAL and up.parallelism == 1 == parallelism:
            return False  # becomes a chained FORWARD edge: nothing crosses an exchange
        if plan_two_phase(spec.aggregates)[0] is None:
            return False
        if strategy == "TWO_PHASE":
            return True
        # AUTO: only when the local phase chains to its producer (no extra exchange)
        return self.settings.chaining_enabled and up.chaining_strategy is not ChainingStrategy.NEVER

    def _translate_two_phase(self, t: OneInputTransformation, ref: _Ref) -> _Ref:
        """Local aggregate chained to the producer, then the global merge behind the exchange."""
        spec = t.spec
        keys = spec.keys if isinstance(spec, KeyedAggregateSpec) else ()
        default = "KeyedAggregate" if keys else "Aggregate"
        local_name = f"Local{default}" if t.name == default else f"{t.name} (local)"
        global_name = f"Global{default}" if t.name == default else t.name
        up = self.nodes[ref.node_id]
        local = dataclasses.replace(
            t, uid=None, parallelism=up.parallelism, max_parallelism=None, non_parallel=False,
            chaining_strategy=ChainingStrategy.ALWAYS, slot_sharing_group=None,
        )
        local_uid = f"{t.uid}-local" if t.uid else None
        local_ref = self.add_node(local, LocalAggregateSpec(keys, spec.aggregates), [_Ref(up.id)],
                                  uid=local_uid, name=local_name)
        return self.add_node(t, MergeAggregateSpec(keys, spec.aggregates),
                             [_Ref(local_ref.node_id, ref.partition)], name=global_name)


def generate_stream_graph(
    sinks: Sequence[Transformation], settings: StreamGraphSettings
) -> StreamGraph:
    """Build the StreamGraph of everything that reaches ``sinks``.

    Raises:
        InvalidProgramException: no sinks, an unserializable function, an explicit forward across
            different parallelisms, a duplicate uid, or a max parallelism below a parallelism.
    """
    if not sinks:
        raise InvalidProgramException(
            "No operators defined in streaming topology. Cannot execute. (Add a sink: "
            "sink_to(), print() or execute_and_collect().)"
        )
    builder = _Builder(settings)
    for t in sorted(sinks, key=lambda s: s.id):
        builder.translate(t)
    if settings.job_type is JobType.STREAMING:
        check_streaming_operators(builder.nodes[k] for k in sorted(builder.nodes))
    return StreamGraph(
        job_name=settings.job_name,
        job_type=settings.job_type,
        nodes=tuple(builder.nodes[k] for k in sorted(builder.nodes)),
        edges=tuple(builder.edges),
        chaining_enabled=settings.chaining_enabled,
        configuration=dict(settings.configuration),
        slot_sharing_group_resources={
            g: r for g, r in builder.group_resources.items()
            if any(n.slot_sharing_group == g for n in builder.nodes.values())},
    )
