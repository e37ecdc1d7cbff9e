"""Control-plane test invokables that process no data (Flink ``NoOpInvokable``,
``BlockingNoOpInvokable``, ``FailingInvokable``).

Use them as ``invokable_class`` of a TaskDeploymentDescriptor or JobVertex:
``"flintlock.testing.invokables:NoOpInvokable"``.

``BlockingInvokable`` blocks until it is cancelled or released. Releasing is test-scoped: a test
creates a latch with ``blocking_latch(name)`` (a ``threading.Event``), passes ``name`` in the job
configuration under ``$internal.test.latch``, sets the event to let the tasks finish, and calls
``remove_blocking_latch(name)`` at the end (``with blocking_latch_scope(name) as latch:`` does both).
Tasks also report their start through ``BlockingInvokable.started`` events kept in the same entry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from flintlock.runtime.deployment import (
    PartitionLocation,
    ResultPartitionDeploymentDescriptor,
    TaskDeploymentDescriptor,
)
from flintlock.runtime.ids import (
    AllocationID,
    ExecutionAttemptID,
    ExecutionVertexID,
    JobID,
    JobVertexID,
)
from flintlock.runtime.taskmanager.invokable import RuntimeEnvironment, TaskCancelledError
from flintlock.runtime.taskmanager.task_execution_state import TaskResult

__all__ = [
    "FAILURE_MESSAGE_KEY",
    "LATCH_KEY",
    "SLEEP_MS_KEY",
    "BlockingInvokable",
    "FailingInvokable",
    "NoOpInvokable",
    "SleepingInvokable",
    "TestLatch",
    "blocking_latch",
    "blocking_latch_scope",
    "make_tdd",
    "remove_blocking_latch",
]

LATCH_KEY = "$internal.test.latch"
SLEEP_MS_KEY = "$internal.test.sleep-ms"
FAILURE_MESSAGE_KEY = "$internal.test.failure-message"
DEFAULT_FAILURE_MESSAGE = "FailingInvokable failed on purpose"


def _empty_result(env: RuntimeEnvironment) -> TaskResult:
    """One empty PartitionLocation per produced partition, so consumers can be deployed."""
    return TaskResult(partitions=tuple(
        PartitionLocation(
            partition_id=p.partition_id,
            producer_attempt=env.tdd.attempt_id,
            uri="",
            rows_per_subpartition=(0,) * p.number_of_subpartitions,
            bytes_per_subpartition=(0,) * p.number_of_subpartitions,
            schema="",
        )
        for p in env.tdd.produced_partitions
    ))


class NoOpInvokable:
    """Finishes at once with empty partitions."""

    def __init__(self, env: RuntimeEnvironment) -> None:
        self.env = env

    def invoke(self) -> TaskResult:
        return _empty_result(self.env)

    def cancel(self) -> None:
        pass


@dataclass
class TestLatch:
    """Releases (``release``) and observes (``started``) the BlockingInvokables of one test."""

    __test__ = False

    release: threading.Event = field(default_factory=threading.Event)
    #: set each time a BlockingInvokable with this latch started invoking
    started: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    started_count: int = 0


_LATCHES: dict[str, TestLatch] = {}
_LATCHES_LOCK = threading.Lock()


def blocking_latch(name: str) -> TestLatch:
    """The latch registered under ``name`` (created on first use)."""
    with _LATCHES_LOCK:
        return _LATCHES.setdefault(name, TestLatch())


def remove_blocking_latch(name: str) -> None:
    """Forget the latch (and release whatever still waits on it)."""
    with _LATCHES_LOCK:
        latch = _LATCHES.pop(name, None)
    if latch is not None:
        latch.release.set()


@contextmanager
def blocking_latch_scope(name: str) -> Iterator[TestLatch]:
    """``blocking_latch(name)`` for the duration of a ``with`` block, removed afterwards."""
    latch = blocking_latch(name)
    try:
        yield latch
    finally:
        remove_blocking_latch(name)


class BlockingInvokable:
    """Blocks until cancelled (raises TaskCancelledError) or its latch is released (finishes).

    Without ``$internal.test.latch`` in the job configuration it blocks until cancelled.
    """

    def __init__(self, env: RuntimeEnvironment) -> None:
        self.env = env
        name = env.configuration.get(LATCH_KEY)
        self._latch = blocking_latch(name) if name else None
        self._wake = threading.Event()

    def invoke(self) -> TaskResult:
        latch = self._latch
        if latch is not None:
            with _LATCHES_LOCK:
                latch.started_count += 1
            latch.started.release()
        while True:
            if self.env.cancelled.is_set() or self._wake.is_set():
                raise TaskCancelledError("BlockingInvokable cancelled")
            if latch is not None and latch.release.is_set():
                return _empty_result(self.env)
            # wake up on cancel at once; poll the shared latch every few milliseconds
            self._wake.wait(0.005 if latch is not None else 0.05)

    def cancel(self) -> None:
        self._wake.set()


class SleepingInvokable:
    """Works ``$internal.test.sleep-ms`` (default 100) ms, then finishes with empty partitions;
    a cancel ends it at once (raises TaskCancelledError)."""

    def __init__(self, env: RuntimeEnvironment) -> None:
        self.env = env

    def invoke(self) -> TaskResult:
        seconds = int(self.env.configuration.get(SLEEP_MS_KEY, "100")) / 1000.0
        if self.env.cancelled.wait(seconds):
            raise TaskCancelledError("SleepingInvokable cancelled")
        return _empty_result(self.env)

    def cancel(self) -> None:
        self.env.cancelled.set()


class FailingInvokable:
    """Raises RuntimeError with ``$internal.test.failure-message`` (or a default)."""

    def __init__(self, env: RuntimeEnvironment) -> None:
        self.env = env

    def invoke(self) -> TaskResult:
        raise RuntimeError(self.env.configuration.get(FAILURE_MESSAGE_KEY, DEFAULT_FAILURE_MESSAGE))

    def cancel(self) -> None:
        pass


def make_tdd(
    invokable: type[object] | str = NoOpInvokable,
    *,
    job_id: JobID | None = None,
    allocation_id: AllocationID | None = None,
    vertex_name: str = "vertex",
    subtask_index: int = 0,
    number_of_subtasks: int = 1,
    attempt_number: int = 0,
    job_configuration: Mapping[str, str] | None = None,
    produced_partitions: tuple[ResultPartitionDeploymentDescriptor, ...] = (),
) -> TaskDeploymentDescriptor:
    """A TaskDeploymentDescriptor running a test invokable (for TaskExecutor/Task tests)."""
    if isinstance(invokable, str):
        spec = invokable
    else:
        spec = f"{invokable.__module__}:{invokable.__qualname__}"
    vertex = ExecutionVertexID(JobVertexID.generate(), subtask_index)
    return TaskDeploymentDescriptor(
        job_id=job_id or JobID.generate(),
        job_name="test-job",
        attempt_id=ExecutionAttemptID.generate(vertex, attempt_number),
        allocation_id=allocation_id or AllocationID.generate(),
        vertex_name=vertex_name,
        number_of_subtasks=number_of_subtasks,
        max_parallelism=128,
        invokable_class=spec,
        produced_partitions=produced_partitions,
        job_configuration=dict(job_configuration or {}),
    )
