"""ExecutionJobVertex (one per JobVertex) and ExecutionVertex (one per subtask).

Follows Flink ``ExecutionJobVertex`` / ``ExecutionVertex``: a vertex owns its current Execution and
a bounded history of prior attempts; a restart creates a new Execution with attempt number + 1.

Speculative execution (Flink ``SpeculativeExecutionVertex``): a vertex may run speculative
attempts beside its current one (``speculative_executions``). ``current_execution`` stays the
representative attempt that REST, the counters and the scheduling strategy read; an attempt that
finishes first, or survives the failure of the representative, is ``promote``d to it. Ended
speculative attempts move to the prior attempts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from flintlock.runtime.executiongraph.archived import ArchivedJobVertex
from flintlock.runtime.executiongraph.execution import Execution
from flintlock.runtime.executiongraph.intermediate_result import (
    ConsumedSubpartitions,
    IntermediateResult,
    IntermediateResultPartition,
)
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.job_graph import JobEdge, JobVertex
from flintlock.runtime.jobgraph.types import ExecutionState

__all__ = ["ConsumedInput", "ExecutionJobVertex", "ExecutionVertex"]


@dataclass(frozen=True)
class ConsumedInput:
    """Input gate ``edge.type_number`` of one subtask: the result and what it reads of it."""

    edge: JobEdge
    result: IntermediateResult
    consumed: ConsumedSubpartitions

    def partitions(self) -> list[IntermediateResultPartition]:
        return [self.result.partitions[n] for n in self.consumed.partition_numbers]


class ExecutionVertex:
    """One parallel subtask of a JobVertex and its attempts."""

    def __init__(
        self,
        job_vertex: ExecutionJobVertex,
        subtask_index: int,
        now_ms: int,
        attempts_history_size: int = 16,
    ) -> None:
        self.job_vertex = job_vertex
        self.id = ExecutionVertexID(job_vertex.id, subtask_index)
        self.subtask_index = subtask_index
        #: produced partitions, in the JobVertex's output order
        self.produced_partitions: list[IntermediateResultPartition] = []
        #: consumed inputs, in input-gate order
        self.inputs: list[ConsumedInput] = []
        self.prior_executions: deque[Execution] = deque(maxlen=attempts_history_size)
        self.current_execution = self._new_execution(0, now_ms)
        #: attempts running beside ``current_execution`` (speculative execution)
        self.speculative_executions: list[Execution] = []

    def _new_execution(self, attempt_number: int, now_ms: int) -> Execution:
        return Execution(
            ExecutionAttemptID.generate(self.id, attempt_number),
            self.job_vertex.name,
            self.job_vertex.parallelism,
            now_ms,
        )

    def current_executions(self) -> list[Execution]:
        """The representative attempt, then the speculative ones."""
        return [self.current_execution, *self.speculative_executions]

    def live_executions(self) -> list[Execution]:
        """The attempts that are not terminal."""
        return [e for e in self.current_executions() if not e.is_terminal()]

    def _next_attempt_number(self) -> int:
        known = [*self.prior_executions, *self.current_executions()]
        return max(e.attempt_number for e in known) + 1

    def add_speculative_execution(self, now_ms: int) -> Execution:
        """A new attempt beside the current one (speculative execution); returns it."""
        execution = self._new_execution(self._next_attempt_number(), now_ms)
        self.speculative_executions.append(execution)
        return execution

    def promote(self, execution: Execution) -> None:
        """Make speculative attempt ``execution`` the representative one (it finished first, or
        the representative failed while it runs); the former one becomes speculative."""
        self.speculative_executions.remove(execution)
        self.speculative_executions.insert(0, self.current_execution)
        self.current_execution = execution

    def archive_ended_speculative(self) -> None:
        """Move speculative attempts that ended to the prior attempts (in attempt order)."""
        ended = [e for e in self.speculative_executions if e.is_terminal()]
        if ended:
            self.speculative_executions = [e for e in self.speculative_executions
                                           if not e.is_terminal()]
            self._add_prior(ended)

    def _add_prior(self, ended: list[Execution]) -> None:
        prior = sorted([*self.prior_executions, *ended], key=lambda e: e.attempt_number)
        self.prior_executions.clear()
        self.prior_executions.extend(prior)  # the oldest drop out of the bounded history

    def reset_for_new_execution(self, now_ms: int) -> Execution:
        """Archive the (terminal) current attempts and create the next one.

        Raises:
            RuntimeError: an attempt is not terminal yet.
        """
        for attempt in self.current_executions():
            if not attempt.is_terminal():
                raise RuntimeError(
                    f"cannot restart {attempt.task_name_with_subtask()}: attempt still "
                    f"{attempt.state.name}\nstory:\n{attempt.story}")
        number = self._next_attempt_number()
        self._add_prior(self.current_executions())
        self.speculative_executions = []
        self.current_execution = self._new_execution(number, now_ms)
        for partition in self.produced_partitions:
            partition.reset_for_new_execution()
        return self.current_execution

    def __repr__(self) -> str:
        return f"<ExecutionVertex {self.job_vertex.name} ({self.subtask_index + 1}/{self.job_vertex.parallelism})>"


@dataclass(eq=False)
class ExecutionJobVertex:
    """One JobVertex expanded to ``parallelism`` ExecutionVertices."""

    job_vertex: JobVertex
    task_vertices: list[ExecutionVertex] = field(default_factory=list)
    #: produced results, in output order
    produced_results: list[IntermediateResult] = field(default_factory=list)
    #: the parallelism it runs at once expanded into subtasks; None until then (a dynamic graph
    #: initializes vertices as their inputs finish)
    decided_parallelism: int | None = None
    #: ``"left"``/``"right"``: its hash join runs as a broadcast join of that side (adaptive
    #: broadcast join, decided with its parallelism); "" as compiled
    broadcast_join_side: str = ""
    #: what the plan shows for the vertex's strategy once decided at run time ("" otherwise)
    operator_strategy: str = ""
    #: the consumer whose head join this vertex runs as a broadcast join chained to its output
    #: (adaptive join in the probe side's producer); None: none
    pushed_join_into: JobVertexID | None = None
    #: ``"left"``/``"right"``: which side of that join this vertex's output is
    pushed_join_side: str = ""
    #: it only cuts its rows to the other side's keys (a semi join); the join stays
    pushed_join_reduce: bool = False
    #: ``"left"``/``"right"``: its head join already ran in that side's producers, whose rows
    #: arrive joined; "" as compiled
    pushed_probe_side: str = ""
    #: consumer vertices chained into this one at run time, in chaining order (their chains
    #: run in this vertex's subtasks, which produce their results)
    chained_consumers: list[ExecutionJobVertex] = field(default_factory=list)
    #: the vertex this one was chained into at run time (it has no subtasks of its own and
    #: shows that vertex's); None: it runs its own
    chained_into: ExecutionJobVertex | None = None
    #: every other vertex of the job is chained into this one (``whole_job_chaining``)
    whole_job_chained: bool = False

    @property
    def id(self) -> JobVertexID:
        return self.job_vertex.id

    @property
    def name(self) -> str:
        return self.job_vertex.name

    @property
    def initialized(self) -> bool:
        return self.decided_parallelism is not None

    @property
    def parallelism(self) -> int:
        """Its subtask count; -1 while a dynamic graph has not decided it (as Flink's REST)."""
        return self.decided_parallelism if self.decided_parallelism is not None else -1

    def sinks(self) -> list[Any]:
        """The sinks its subtasks write, in the order they number them: its chain's, then
        those of the consumers chained into it at run time."""
        return [*self.job_vertex.sinks,
                *(sink for c in self.chained_consumers for sink in c.job_vertex.sinks)]

    def all_finished(self) -> bool:
        if self.chained_into is not None:
            return self.chained_into.all_finished()
        return all(v.current_execution.state is ExecutionState.FINISHED for v in self.task_vertices)

    def archive(self) -> ArchivedJobVertex:
        """Its subtasks' attempts; a vertex chained into another at run time shows that
        vertex's subtasks (they run its operators) and names it in ``chained_into``."""
        runs = self.chained_into if self.chained_into is not None else self
        vertices = runs.task_vertices
        prior = [e.archive() for v in vertices for e in v.prior_executions]
        concurrent = [e.archive() for v in vertices for e in v.speculative_executions]
        return ArchivedJobVertex(
            id=self.id,
            name=self.name,
            parallelism=self.parallelism,
            max_parallelism=self.job_vertex.max_parallelism,
            slot_sharing_group=self.job_vertex.slot_sharing_group,
            subtasks=tuple(v.current_execution.archive() for v in vertices),
            prior_attempts=tuple(prior),
            concurrent_attempts=tuple(concurrent),
            chained_into=runs.id if runs is not self else None,
        )
