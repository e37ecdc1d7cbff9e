"""ExecutionDeployer: allocates shared slots for a scheduled region and deploys it as one bulk.

Follows Flink ``DefaultExecutionDeployer`` (fact sheet 7.2): the executions of a region go
SCHEDULED, one slot request per shared slot (same slot sharing group + same subtask index) goes to
the ``DeclarativeSlotPool``, and only when every request of the bulk holds a slot does each
execution go DEPLOYING with its ``DeployTask``. A consumer whose input partition is gone cannot get
a TaskDeploymentDescriptor; it is failed (recoverably) once the step's deployment loops are done.

A mixin of ``DefaultScheduler``'s pure core (no I/O): it reads and writes the scheduler's graph,
pool, shared-slot bookkeeping and command list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.executiongraph.execution import Execution, SlotAssignment
from flintlock.runtime.executiongraph.execution_graph import ExecutionGraph
from flintlock.runtime.ids import ExecutionAttemptID, ExecutionVertexID, JobVertexID
from flintlock.runtime.jobgraph.types import ExecutionState
from flintlock.runtime.jobmaster.slotpool.declarative_slot_pool import (
    AllocatedSlot,
    DeclarativeSlotPool,
)
from flintlock.runtime.scheduler.messages import Command, DeployTask
from flintlock.runtime.scheduler.shared_slot_requests import SharedSlotRequest, SharedSlotRequests
from flintlock.runtime.scheduler.tdd_factory import (
    MissingPartitionLocation,
    create_task_deployment_descriptor,
)
from flintlock.runtime.taskmanager.task_execution_state import SerializedError

__all__ = ["ExecutionDeployer"]


class ExecutionDeployer:
    """Slot allocation and deployment of scheduled regions (mixed into ``DefaultScheduler``).

    Uses the scheduler's ``_transition``, ``_fail_execution`` and ``_attempt_order``.
    """

    graph: ExecutionGraph
    pool: DeclarativeSlotPool
    splits: Mapping[JobVertexID, list[list[Any]]]
    job_configuration: dict[str, Any]
    pipelined_root: str
    _shared: SharedSlotRequests
    _undeployable: list[tuple[Execution, SerializedError]]
    _out: list[Command]

    #: from ``DefaultScheduler``
    _transition: Callable[[Execution, ExecutionState, str], None]
    _fail_execution: Callable[[Execution, SerializedError], None]
    _attempt_order: Callable[[ExecutionAttemptID], int]

    def _allocate_slots_and_deploy(self, vertex_ids: tuple[ExecutionVertexID, ...]) -> None:
        executions = [self.graph.vertex(v).current_execution for v in vertex_ids]
        for e in executions:
            self._transition(e, ExecutionState.SCHEDULED, "region scheduled")
        groups: dict[tuple[str, int], list[Execution]] = {}
        for e in executions:
            ssg = self.graph.vertex(e.attempt_id.execution_vertex_id).job_vertex.job_vertex.slot_sharing_group
            groups.setdefault((ssg, e.subtask_index), []).append(e)
        requests = self._shared.add_bulk({e.attempt_id for e in m} for m in groups.values())
        resources = self.graph.job_graph.slot_sharing_group_resources
        for (ssg, _), request in zip(groups, requests, strict=True):
            request.resource_profile = resources.get(ssg, ResourceProfile.UNKNOWN)
            slot = self.pool.request_slot(request.id, request.resource_profile)
            if slot is not None:
                self._assign(request, slot)
        self._deploy_ready_bulks()

    def _assign(self, request: SharedSlotRequest, slot: AllocatedSlot) -> None:
        self._shared.assign(request, slot)
        assignment = SlotAssignment(slot.allocation_id, slot.resource_id, slot.task_executor_address)
        for attempt in request.members:
            execution = self.graph.find_current_execution(attempt)
            if execution is not None:
                execution.slot = assignment

    def _assign_pending_and_deploy(self) -> None:
        for request_id, slot in self.pool.assign_pending():
            self._assign(self._shared.request(request_id), slot)
        self._deploy_ready_bulks()

    def _deploy_ready_bulks(self) -> None:
        for bulk in self._shared.take_ready_bulks():
            for request_id in bulk.requests:
                request = self._shared.request(request_id)
                for attempt in sorted(request.members, key=self._attempt_order):
                    execution = self.graph.find_current_execution(attempt)
                    if execution is not None and execution.state is ExecutionState.SCHEDULED:
                        self._deploy(execution)

    def _deploy(self, execution: Execution) -> None:
        vertex = self.graph.vertex(execution.attempt_id.execution_vertex_id)
        assert execution.slot is not None
        splits_of_vertex = self.splits.get(vertex.job_vertex.id)
        splits = splits_of_vertex[vertex.subtask_index] if splits_of_vertex else []
        chained_splits = {c.id: self.splits[c.id][vertex.subtask_index]
                          for c in vertex.job_vertex.chained_consumers if self.splits.get(c.id)}
        try:
            tdd = create_task_deployment_descriptor(
                self.graph, vertex, execution, execution.slot.allocation_id, splits,
                self.job_configuration, self.pipelined_root, execution.task_restore,
                chained_splits,
            )
        except MissingPartitionLocation as exc:
            # failed once this step's deployment loops are done (the failover cancels others)
            self._undeployable.append((execution, SerializedError.from_exception(exc)))
            return
        self._transition(execution, ExecutionState.DEPLOYING, f"slot {execution.slot.allocation_id}")
        self._out.append(DeployTask(execution.slot.task_executor_address, tdd))

    def _fail_undeployable(self) -> None:
        """Fail the executions whose input partitions were missing at deployment.

        A lost input is recoverable: its ``partition_not_found`` makes region failover restart
        the producer region (Flink: the consumer fails with ``PartitionNotFoundException``).
        """
        while self._undeployable:
            execution, error = self._undeployable.pop(0)
            if self.graph.find_current_execution(execution.attempt_id) is execution and \
                    execution.state is ExecutionState.SCHEDULED:
                self._fail_execution(execution, error)
