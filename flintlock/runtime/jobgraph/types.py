"""Enums of the JobGraph and of job/task life cycles: JobStatus, ExecutionState, partition types.

Follows Flink: ``api/common/JobStatus``, ``runtime/execution/ExecutionState``,
``runtime/jobgraph/DistributionPattern``, ``runtime/io/network/partition/ResultPartitionType``
(fact sheet sections 1 and 2).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = [
    "ALLOWED_EXECUTION_TRANSITIONS",
    "ALLOWED_JOB_TRANSITIONS",
    "DistributionPattern",
    "ExecutionState",
    "IllegalStateTransition",
    "JobStatus",
    "JobType",
    "ResultPartitionType",
    "ShipStrategy",
]


class IllegalStateTransition(RuntimeError):
    """An entity was asked to move between two states its transition table forbids."""

    def __init__(self, entity: str, source: object, target: object, story: str = "") -> None:
        msg = f"{entity}: illegal transition {source} -> {target}"
        if story:
            msg += f"\nstory:\n{story}"
        super().__init__(msg)
        self.entity = entity
        self.source = source
        self.target = target


class JobStatus(enum.Enum):
    """Status of a job (Flink ``JobStatus``; note the spelling CANCELLING for jobs).

    ::

        INITIALIZING -> CREATED -> RUNNING -> FINISHED
                           |          |  \\-> RESTARTING -> RUNNING
                           |          \\--> FAILING -> FAILED
                           \\----------+--> CANCELLING -> CANCELED
        any non-terminal -> SUSPENDED (leadership lost; locally terminal only)
    """

    INITIALIZING = "INITIALIZING"  #: accepted by the Dispatcher, JobMaster not yet running
    CREATED = "CREATED"  #: ExecutionGraph built, no task started
    RUNNING = "RUNNING"  #: some tasks are scheduled or running
    FAILING = "FAILING"  #: failed; waiting for tasks to be cancelled
    FAILED = "FAILED"  #: failed with a root cause (globally terminal)
    CANCELLING = "CANCELLING"  #: cancel requested; waiting for tasks to be cancelled
    CANCELED = "CANCELED"  #: cancelled (globally terminal)
    FINISHED = "FINISHED"  #: all tasks finished, sinks committed (globally terminal)
    RESTARTING = "RESTARTING"  #: being reset for a restart
    SUSPENDED = "SUSPENDED"  #: JobMaster lost leadership (locally terminal)
    RECONCILING = "RECONCILING"  #: recovering task state after a JobManager failover

    def is_globally_terminal(self) -> bool:
        return self in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED)

    def is_terminal(self) -> bool:
        return self.is_globally_terminal() or self is JobStatus.SUSPENDED


ALLOWED_JOB_TRANSITIONS: Mapping[JobStatus, frozenset[JobStatus]] = {
    JobStatus.INITIALIZING: frozenset(
        {JobStatus.CREATED, JobStatus.FAILED, JobStatus.CANCELLING, JobStatus.CANCELED,
         JobStatus.SUSPENDED}
    ),
    JobStatus.CREATED: frozenset(
        {JobStatus.RUNNING, JobStatus.CANCELLING, JobStatus.FAILING, JobStatus.FAILED,
         JobStatus.SUSPENDED, JobStatus.RECONCILING, JobStatus.CANCELED}
    ),
    JobStatus.RUNNING: frozenset(
        {JobStatus.FINISHED, JobStatus.FAILING, JobStatus.CANCELLING, JobStatus.RESTARTING,
         JobStatus.SUSPENDED}
    ),
    JobStatus.RESTARTING: frozenset(
        {JobStatus.RUNNING, JobStatus.CANCELLING, JobStatus.FAILING, JobStatus.SUSPENDED}
    ),
    JobStatus.FAILING: frozenset(
        {JobStatus.FAILED, JobStatus.CANCELLING, JobStatus.CANCELED, JobStatus.SUSPENDED}
    ),
    JobStatus.CANCELLING: frozenset({JobStatus.CANCELED, JobStatus.FAILED, JobStatus.SUSPENDED}),
    JobStatus.RECONCILING: frozenset(
        {JobStatus.RUNNING, JobStatus.FAILING, JobStatus.CANCELLING, JobStatus.SUSPENDED}
    ),
    JobStatus.FINISHED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELED: frozenset(),
    JobStatus.SUSPENDED: frozenset(),
}


class ExecutionState(enum.Enum):
    """State of one execution attempt (Flink ``ExecutionState``; note CANCELING for tasks).

    ::

        CREATED -> SCHEDULED -> DEPLOYING -> INITIALIZING -> RUNNING -> FINISHED
           |           |            |              |            |
           |           |            +--------------+------------+--> CANCELING -> CANCELED
           +-----------+----------------------------------------------------------> CANCELED
        any non-terminal state ------------------------------------------------> FAILED

    FINISHED means "reached the end of its input"; cancelling never produces it.
    """

    CREATED = "CREATED"  #: waiting to be scheduled
    SCHEDULED = "SCHEDULED"  #: slot requested / assigned, not yet deployed
    DEPLOYING = "DEPLOYING"  #: TaskDeploymentDescriptor sent; Task thread starting
    RUNNING = "RUNNING"  #: the invokable is processing data
    FINISHED = "FINISHED"  #: end of input reached; outputs complete (terminal)
    CANCELING = "CANCELING"  #: cancel sent; waiting for the task to stop
    CANCELED = "CANCELED"  #: cancelled (terminal)
    FAILED = "FAILED"  #: failed with an error (terminal)
    RECONCILING = "RECONCILING"  #: recovering after a JobManager failover (unused)
    INITIALIZING = "INITIALIZING"  #: task restoring state / opening operators

    def is_terminal(self) -> bool:
        return self in (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


_E = ExecutionState
ALLOWED_EXECUTION_TRANSITIONS: Mapping[ExecutionState, frozenset[ExecutionState]] = {
    _E.CREATED: frozenset({_E.SCHEDULED, _E.CANCELED, _E.FAILED, _E.DEPLOYING, _E.RECONCILING}),
    _E.SCHEDULED: frozenset({_E.DEPLOYING, _E.CANCELED, _E.FAILED}),
    _E.DEPLOYING: frozenset({_E.INITIALIZING, _E.RUNNING, _E.FINISHED, _E.CANCELING, _E.CANCELED,
                             _E.FAILED}),
    _E.INITIALIZING: frozenset({_E.RUNNING, _E.FINISHED, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.RUNNING: frozenset({_E.FINISHED, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.CANCELING: frozenset({_E.CANCELED, _E.FAILED}),
    _E.RECONCILING: frozenset({_E.INITIALIZING, _E.RUNNING, _E.FINISHED, _E.CANCELED, _E.FAILED}),
    _E.FINISHED: frozenset(),
    _E.CANCELED: frozenset(),
    _E.FAILED: frozenset(),
}


class JobType(enum.Enum):
    """Whether a JobGraph was compiled in BATCH or STREAMING runtime mode."""

    BATCH = "BATCH"
    STREAMING = "STREAMING"


class DistributionPattern(enum.Enum):
    """How producer subtasks connect to consumer subtasks (Flink ``DistributionPattern``)."""

    ALL_TO_ALL = "ALL_TO_ALL"  #: every producer subtask feeds every consumer subtask
    POINTWISE = "POINTWISE"  #: each producer subtask feeds one or a few consumer subtasks


class ResultPartitionType(enum.Enum):
    """Type of an IntermediateDataSet's partitions (Flink ``ResultPartitionType``).

    BLOCKING partitions are complete when the producer finishes and may be read several times;
    they separate pipelined regions. PIPELINED partitions are consumed while produced.
    """

    BLOCKING = "BLOCKING"
    PIPELINED = "PIPELINED"
    PIPELINED_BOUNDED = "PIPELINED_BOUNDED"

    def is_blocking(self) -> bool:
        return self is ResultPartitionType.BLOCKING

    def must_be_pipelined_consumed(self) -> bool:
        return self in (ResultPartitionType.PIPELINED, ResultPartitionType.PIPELINED_BOUNDED)

    def is_reconsumable(self) -> bool:
        return self is ResultPartitionType.BLOCKING


class ShipStrategy(enum.Enum):
    """The partitioner of a non-chained edge; its value is what Flink's plan JSON prints.

    FORWARD and RESCALE are pointwise; all others are all-to-all (fact sheet 3.2).
    """

    FORWARD = "FORWARD"  #: subtask i -> subtask i (same parallelism)
    HASH = "HASH"  #: by key group: pmod(xxhash64(keys), max_parallelism) -> contiguous ranges
    REBALANCE = "REBALANCE"  #: round robin over all consumers
    RESCALE = "RESCALE"  #: round robin over a local subset of consumers
    BROADCAST = "BROADCAST"  #: every consumer reads all data
    GLOBAL = "GLOBAL"  #: everything to consumer subtask 0

    def distribution_pattern(self) -> DistributionPattern:
        if self in (ShipStrategy.FORWARD, ShipStrategy.RESCALE):
            return DistributionPattern.POINTWISE
        return DistributionPattern.ALL_TO_ALL
