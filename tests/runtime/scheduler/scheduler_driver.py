"""Layer-1 harness of the scheduler core: build small JobGraphs, feed events, collect commands.

``Driver`` turns ``ScheduleTimer`` commands into ``ManualClock`` timers, so ``advance(seconds)``
delivers exactly the timer events that are due; every command is also kept in ``commands``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flintlock.config.configuration import Configuration
from flintlock.runtime.clock import ManualClock
from flintlock.runtime.deployment import PartitionLocation
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    IntermediateDataSetID,
    JobID,
    JobVertexID,
    ResourceID,
)
from flintlock.runtime.jobgraph.job_graph import IntermediateDataSet, JobEdge, JobGraph, JobVertex
from flintlock.runtime.jobgraph.types import (
    ExecutionState,
    JobType,
    ResultPartitionType,
    ShipStrategy,
)
from flintlock.runtime.scheduler.adaptivebatch.adaptive_batch_scheduler import (
    AdaptiveBatchScheduler,
    AutoParallelismSettings,
    dynamic_vertices,
)
from flintlock.runtime.scheduler.adaptivebatch.speculative_scheduler import SpeculativeScheduler
from flintlock.runtime.scheduler.default_scheduler import DefaultScheduler
from flintlock.runtime.scheduler.messages import (
    Command,
    DeployTask,
    Event,
    ScheduleTimer,
    TaskExecutionStateChanged,
)
from flintlock.runtime.taskexecutor.gateway import SlotOffer
from flintlock.runtime.taskmanager.task_execution_state import TaskExecutionState, TaskResult

__all__ = ["BLOCKING", "PIPELINED", "TM", "Driver", "S", "deploys", "make_job", "names"]

S = ShipStrategy
BLOCKING = ResultPartitionType.BLOCKING
PIPELINED = ResultPartitionType.PIPELINED_BOUNDED
TM = ResourceID("tm-1")


def make_job(
    vertices: list[tuple[str, int]],
    edges: list[tuple[int, int, ShipStrategy]],
    result_type: ResultPartitionType = BLOCKING,
    sinks: dict[int, tuple[Any, ...]] | None = None,
    configuration: dict[str, str] | None = None,
    auto: frozenset[int] = frozenset(),
    joins: dict[int, str] | None = None,
    probes: dict[int, str] | None = None,
) -> JobGraph:
    """A JobGraph of ``(name, parallelism)`` vertices and ``(source, target, ship)`` edges;
    vertices whose index is in ``auto`` have a parallelism the program did not set; ``joins``:
    vertex index -> the join type of its head hash join (``JobVertex.adaptive_join``);
    ``probes``: vertex index -> that join's probe side (``JobVertex.adaptive_join_probe``)."""
    ids = [JobVertexID.generate() for _ in vertices]
    results: dict[int, list[IntermediateDataSet]] = {i: [] for i in range(len(vertices))}
    inputs: dict[int, list[JobEdge]] = {i: [] for i in range(len(vertices))}
    for src, dst, ship in edges:
        ds = IntermediateDataSet(IntermediateDataSetID.generate(), ids[src], result_type, ids[dst], ship, ("k",))
        results[src].append(ds)
        inputs[dst].append(JobEdge(ds.id, ids[dst], ship, len(inputs[dst])))
    jvs = tuple(
        JobVertex(ids[i], n, p, 128, "tests:Noop", inputs=tuple(inputs[i]), results=tuple(results[i]),
                  sinks=(sinks or {}).get(i, ()), parallelism_configured=i not in auto,
                  adaptive_join=(joins or {}).get(i, ""),
                  adaptive_join_probe=(probes or {}).get(i, ""),
                  invokable_payload=f"chain of {n}".encode())
        for i, (n, p) in enumerate(vertices)
    )
    return JobGraph(JobID.generate(), "job", JobType.BATCH, jvs, configuration=configuration or {})


class Driver:
    """Feeds events, collects commands; ScheduleTimer commands become ManualClock timers."""

    def __init__(self, job: JobGraph, adaptive: bool = False, speculative: bool = False,
                 **conf: str) -> None:
        """``adaptive``: an AdaptiveBatchScheduler over a dynamic graph (``conf`` may set the
        ``execution.batch.adaptive.auto-parallelism.*`` keys); ``speculative``: its
        SpeculativeScheduler (``execution.batch.speculative.*``, ``slow-task-detector.*``)."""
        self.clock = ManualClock()
        # offers match at once unless a test sets slot.request.max-interval (its batching)
        merged = Configuration({"slot.request.timeout": "10 s", "slot.idle.timeout": "5 s",
                                "slot.request.max-interval": "0",
                                **dict(job.configuration), **conf})
        self.scheduler: DefaultScheduler
        if adaptive or speculative:
            settings = AutoParallelismSettings.from_configuration(merged)
            self.graph = ExecutionGraph(job, self.clock.now_ms,
                                        dynamic_vertices=dynamic_vertices(job, settings))
            kind = SpeculativeScheduler if speculative else AdaptiveBatchScheduler
            self.scheduler = kind(self.graph, merged, self.clock, settings, validate=True)
        else:
            self.graph = ExecutionGraph(job, self.clock.now_ms)
            self.scheduler = DefaultScheduler(self.graph, merged, self.clock, validate=True,
                                              pipelined_root="/pipelined-root")
        self.commands: list[Command] = []
        self._due: list[Event] = []

    def _collect(self, commands: list[Command]) -> list[Command]:
        for c in commands:
            if isinstance(c, ScheduleTimer):
                self.clock.call_later(c.delay_s, lambda e=c.event: self._due.append(e))
        self.commands.extend(commands)
        return [c for c in commands if not isinstance(c, ScheduleTimer)]

    def handle(self, event: Event) -> list[Command]:
        return self._collect(self.scheduler.handle(event))

    def offer(self, n: int, tm: ResourceID = TM) -> tuple[tuple[SlotOffer, ...], list[Command]]:
        offers = tuple(SlotOffer(AllocationID.generate(), i) for i in range(n))
        accepted, cmds = self.scheduler.offer_slots(tm, f"inproc://{tm}", offers)
        return accepted, self._collect(cmds)

    def advance(self, seconds: float) -> list[Command]:
        self.clock.advance(seconds)
        out: list[Command] = []
        while self._due:
            out += self.handle(self._due.pop(0))
        return out

    def report(self, attempt: ExecutionAttemptID, state: ExecutionState, **kw: Any) -> list[Command]:
        return self.handle(TaskExecutionStateChanged(TaskExecutionState(self.graph.job_graph.job_id, attempt, state, **kw)))

    def finish(self, tdd_cmd: DeployTask, committables: dict[int, object] | None = None,
               tm_local: bool = False, sizes: Sequence[int] | None = None) -> list[Command]:
        """Report the attempt FINISHED with one location per produced partition.

        ``sizes``: the bytes of each subpartition (default 10 each).

        ``tm_local``: the partitions live on the local disk of the TaskManager the attempt ran on
        (``stores_local_resources_on``), as without ``shuffle.storage-dir``.
        """
        tdd = tdd_cmd.tdd
        stored_on = None
        if tm_local:
            execution = self.graph.find_current_execution(tdd.attempt_id)
            assert execution is not None and execution.slot is not None
            stored_on = execution.slot.resource_id
        locations = tuple(
            PartitionLocation(rp.partition_id, tdd.attempt_id, f"/shuffle/{rp.partition_id}",
                              (1,) * rp.number_of_subpartitions,
                              tuple(sizes) if sizes is not None else (10,) * rp.number_of_subpartitions,
                              "k string",
                              stores_local_resources_on=stored_on)
            for rp in tdd.produced_partitions
        )
        result = TaskResult(partitions=locations, committables=committables or {},
                            accumulators={f"acc-{tdd.vertex_name}-{tdd.subtask_index}": b"x"})
        return self.report(tdd.attempt_id, ExecutionState.FINISHED, result=result)

    def attempts(self, vertex_name: str) -> list[int]:
        """Current attempt number of each subtask of ``vertex_name``."""
        (ejv,) = [v for v in self.graph.job_vertices.values() if v.name == vertex_name]
        return [v.current_execution.attempt_number for v in ejv.task_vertices]


def deploys(commands: Sequence[Command]) -> list[DeployTask]:
    return [c for c in commands if isinstance(c, DeployTask)]


def names(commands: Sequence[Command]) -> list[str]:
    return [c.tdd.task_name_with_subtask() for c in deploys(commands)]
