"""WorkerTracker: the active ResourceManager's pure view of the TaskManagers (workers) it started.

Follows Flink ``resourcemanager/active/ActiveResourceManager`` (its pending worker counter,
``currentAttemptUnregisteredWorkers``, ``startWorkerFailureRater`` and ``startWorkerCoolDown``,
``checkResourceDeclarations``) and the idle-TaskManager release of
``slotmanager/FineGrainedSlotManager#checkTaskManagerIdleAndTimeout`` in one small core: typed
events in, ``StartWorker`` / ``StopWorker`` / ``CheckReleasable`` commands out. No asyncio, no
processes; ``ActiveResourceManager`` executes the commands through its ``ResourceManagerDriver``.

Decisions on every ``ResourcesChecked`` (the SlotManager's view after it allocated free slots):

- **start**: default slots jobs still miss, plus ``redundant`` workers' slots while any job
  declares requirements, minus free slots and the slots of default workers still starting, are
  covered by new default workers (``ceil(deficit / slots per worker)``). Slots of a known
  ``ResourceProfile`` (a slot sharing group with resources) that no registered worker has room
  for are covered by workers sized for them: as many such slots per worker as the default
  worker's cores hold (at least one), with those slots' cores and memory in all, minus the ones
  such workers still starting will offer. Never beyond ``max_slots`` in total; while start-up
  failures in the last minute exceed ``max_failure_rate``, one start every
  ``retry_interval_ms`` (Flink's cool-down).
- **initial**: until the first job declares requirements, ``initial_workers`` workers' slots
  count as missing, once: an application cluster's first TaskManager starts while its
  JobManager runs main(), not after. One that no job uses is released when idle.
- **release**: a worker of ours whose slots have all been free for ``idle_timeout_ms`` is asked
  whether it can be released (``CheckReleasable``: it may hold result partitions that running jobs
  still read); if so, and its slots are not needed as redundant ones, it is stopped.
- **registration timeout**: a worker not registered ``registration_timeout_ms`` after its start
  is stopped and counted as a start-up failure.

Workers the tracker did not start (TaskManagers a user started) are counted as capacity but never
stopped.

::

    REQUESTED --registered--> REGISTERED --idle, releasable--> RELEASING
        |                                                           ^
        +--------------- registration timeout ----------------------+
    (any state) --terminated / start failed--> removed
"""

from __future__ import annotations

import enum
import functools
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.jobgraph.types import IllegalStateTransition

__all__ = [
    "CheckReleasable",
    "ReleasableAnswered",
    "ResourcesChecked",
    "StartWorker",
    "StopWorker",
    "Worker",
    "WorkerCommand",
    "WorkerRegistered",
    "WorkerResourceSpec",
    "WorkerSettings",
    "WorkerStartFailed",
    "WorkerState",
    "WorkerTerminated",
    "WorkerTracker",
    "WorkerTrackerEvent",
]

_STORY_LENGTH = 32
_FAILURE_WINDOW_MS = 60_000  # Flink's start-worker failure rate is per minute


class WorkerState(enum.Enum):
    """A started worker's state as the active ResourceManager sees it."""

    REQUESTED = "REQUESTED"  #: the driver was asked to start it; its TaskExecutor has not registered
    REGISTERED = "REGISTERED"  #: its TaskExecutor registered; its slots are in the SlotManager
    RELEASING = "RELEASING"  #: the driver was asked to stop it


_ALLOWED = {
    WorkerState.REQUESTED: frozenset({WorkerState.REGISTERED, WorkerState.RELEASING}),
    WorkerState.REGISTERED: frozenset({WorkerState.RELEASING}),
    WorkerState.RELEASING: frozenset(),
}


@dataclass(frozen=True)
class WorkerResourceSpec:
    """What one worker offers (Flink ``WorkerResourceSpec``): its slots, CPU cores (the cores
    of its embedded Spark server) and task heap, task off-heap and managed memory (bytes; all
    zero: the Spark server's default JVM size)."""

    number_of_slots: int
    cpu_cores: int
    task_heap_memory: int = 0
    task_off_heap_memory: int = 0
    managed_memory: int = 0

    def __post_init__(self) -> None:
        if self.number_of_slots < 1 or self.cpu_cores < 1:
            raise ValueError(f"a worker needs at least one slot and one core: {self}")

    @property
    def sized_memory(self) -> bool:
        """Whether the worker's JVM must be sized for its memory."""
        return bool(self.task_heap_memory or self.task_off_heap_memory or self.managed_memory)

    @classmethod
    def for_slots(cls, profile: ResourceProfile, slots: int) -> WorkerResourceSpec:
        """A worker holding ``slots`` slots of ``profile`` (cores rounded up)."""
        return cls(slots, max(1, math.ceil(profile.cpu_cores * slots - 1e-6)),
                   profile.task_heap_memory * slots, profile.task_off_heap_memory * slots,
                   profile.managed_memory * slots)


@dataclass(frozen=True)
class WorkerSettings:
    """The tracker's configuration (times in ms; ``max_failure_rate`` per minute)."""

    spec: WorkerResourceSpec
    max_slots: int | None = None
    redundant: int = 0
    idle_timeout_ms: int = 30_000
    registration_timeout_ms: int = 300_000
    max_failure_rate: float = 10.0
    retry_interval_ms: int = 3_000
    initial_workers: int = 0


# ---- events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerTrackerEvent:
    """Base of the events; ``now_ms`` is the ResourceManager's clock, ``cause_id`` the cause."""


@dataclass(frozen=True)
class ResourcesChecked(WorkerTrackerEvent):
    """The SlotManager's view after allocating free slots.

    Attributes:
        missing_slots: default slots jobs declared that no free slot could serve.
        has_requirements: whether any job declares slots at all.
        slots: registered TaskExecutor -> (slots, free slots).
        missing_resources: slots of a known profile that no registered TaskExecutor has
            room for, per profile.
    """

    now_ms: int
    missing_slots: int
    has_requirements: bool
    slots: Mapping[ResourceID, tuple[int, int]]
    cause_id: str = ""
    missing_resources: Mapping[ResourceProfile, int] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerRegistered(WorkerTrackerEvent):
    resource_id: ResourceID
    now_ms: int
    cause_id: str = ""


@dataclass(frozen=True)
class WorkerStartFailed(WorkerTrackerEvent):
    """The driver could not start the worker (e.g. the interpreter does not exist)."""

    resource_id: ResourceID
    cause: str
    now_ms: int
    cause_id: str = ""


@dataclass(frozen=True)
class WorkerTerminated(WorkerTrackerEvent):
    """The worker's process ended (Flink ``ResourceEventHandler#onWorkerTerminated``)."""

    resource_id: ResourceID
    diagnostics: str
    now_ms: int
    cause_id: str = ""


@dataclass(frozen=True)
class ReleasableAnswered(WorkerTrackerEvent):
    """The answer to ``CheckReleasable`` (Flink ``TaskExecutorGateway#canBeReleased``)."""

    resource_id: ResourceID
    releasable: bool
    now_ms: int
    cause_id: str = ""


# ---- commands ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerCommand:
    resource_id: ResourceID


@dataclass(frozen=True)
class StartWorker(WorkerCommand):
    spec: WorkerResourceSpec
    cause_id: str = ""


@dataclass(frozen=True)
class StopWorker(WorkerCommand):
    """Close the worker's TaskExecutor connection, then have the driver stop it."""

    reason: str
    cause_id: str = ""


@dataclass(frozen=True)
class CheckReleasable(WorkerCommand):
    cause_id: str = ""


# ---- state ------------------------------------------------------------------------------------


@dataclass
class Worker:
    resource_id: ResourceID
    spec: WorkerResourceSpec
    state: WorkerState
    since_ms: int
    #: the profile whose slots it was started for (None: a default worker)
    for_profile: ResourceProfile | None = None
    #: when all its slots became free (None: some slot is used, or not registered)
    idle_since_ms: int | None = None
    release_check_pending: bool = False
    story: deque[str] = field(default_factory=lambda: deque(maxlen=_STORY_LENGTH))


class WorkerTracker:
    """The workers this ResourceManager started, and when to start or stop more.

    Args:
        settings: spec, limits and timeouts.
        id_prefix: workers are named ``<id_prefix>-<n>`` (n counts from 1 per tracker).
        validate: run ``validate()`` after every event (tests).
    """

    def __init__(self, settings: WorkerSettings, id_prefix: str = "taskmanager",
                 validate: bool = False) -> None:
        self.settings = settings
        self._id_prefix = id_prefix
        self._validate_each_step = validate
        self._workers: dict[ResourceID, Worker] = {}
        self._started = 0
        self._failures: deque[int] = deque()  # start-up failure times (ms), last minute
        self._cool_down_until_ms = 0
        self._initial_pending = settings.initial_workers > 0  # until a job declares slots
        #: why the last check started fewer workers than needed ("" when it did not)
        self.held_back = ""
        self.last_failure = ""

    # ---- queries -------------------------------------------------------------------------------

    def workers(self, state: WorkerState | None = None) -> list[Worker]:
        return [w for w in self._workers.values() if state is None or w.state is state]

    def worker(self, resource_id: ResourceID) -> Worker | None:
        return self._workers.get(resource_id)

    def is_ours(self, resource_id: ResourceID) -> bool:
        return resource_id in self._workers

    def failures_in_last_minute(self, now_ms: int) -> int:
        self._expire_failures(now_ms)
        return len(self._failures)

    def story(self, resource_id: ResourceID) -> str:
        worker = self._workers.get(resource_id)
        return "\n".join(worker.story) if worker else ""

    # ---- events --------------------------------------------------------------------------------

    def handle(self, event: WorkerTrackerEvent) -> list[WorkerCommand]:
        """Apply ``event``; returns what to do."""
        commands = self._handle(event)
        if self._validate_each_step:
            self.validate()
        return commands

    @functools.singledispatchmethod
    def _handle(self, event: WorkerTrackerEvent) -> list[WorkerCommand]:
        raise TypeError(f"unknown worker tracker event {event!r}")

    @_handle.register
    def _(self, event: ResourcesChecked) -> list[WorkerCommand]:
        commands: list[WorkerCommand] = self._registration_timeouts(event)
        commands += self._idle_workers(event)
        commands += self._start_workers(event)
        return commands

    @_handle.register
    def _(self, event: WorkerRegistered) -> list[WorkerCommand]:
        worker = self._workers.get(event.resource_id)
        if worker is not None and worker.state is WorkerState.REQUESTED:
            self._transition(worker, WorkerState.REGISTERED, event.now_ms,
                             f"registered cause={event.cause_id}")
        return []

    @_handle.register
    def _(self, event: WorkerStartFailed) -> list[WorkerCommand]:
        if self._workers.pop(event.resource_id, None) is not None:
            self._record_failure(event.now_ms, f"{event.resource_id} could not start: {event.cause}")
        return []

    @_handle.register
    def _(self, event: WorkerTerminated) -> list[WorkerCommand]:
        worker = self._workers.pop(event.resource_id, None)
        if worker is not None and worker.state is WorkerState.REQUESTED:
            self._record_failure(event.now_ms, f"{event.resource_id} ended before it registered: "
                                               f"{event.diagnostics}")
        return []

    @_handle.register
    def _(self, event: ReleasableAnswered) -> list[WorkerCommand]:
        worker = self._workers.get(event.resource_id)
        if worker is None or not worker.release_check_pending:
            return []
        worker.release_check_pending = False
        if worker.state is not WorkerState.REGISTERED or worker.idle_since_ms is None:
            return []  # it got work meanwhile
        if not event.releasable:  # it holds partitions running jobs read: ask again later
            worker.idle_since_ms = event.now_ms
            worker.story.append(f"not releasable yet cause={event.cause_id}")
            return []
        idle_s = (event.now_ms - worker.idle_since_ms) / 1000
        self._transition(worker, WorkerState.RELEASING, event.now_ms,
                         f"idle cause={event.cause_id}")
        return [StopWorker(worker.resource_id, f"idle for {idle_s:.0f} s "
                           f"(resourcemanager.taskmanager-timeout)", event.cause_id)]

    # ---- decisions -----------------------------------------------------------------------------

    def _registration_timeouts(self, event: ResourcesChecked) -> list[WorkerCommand]:
        commands: list[WorkerCommand] = []
        limit = self.settings.registration_timeout_ms
        for worker in self.workers(WorkerState.REQUESTED):
            if event.now_ms - worker.since_ms >= limit:
                reason = (f"did not register within {limit / 1000:.0f} s "
                          "(resourcemanager.taskmanager-registration.timeout)")
                self._transition(worker, WorkerState.RELEASING, event.now_ms,
                                 f"registration timeout cause={event.cause_id}")
                self._record_failure(event.now_ms, f"{worker.resource_id} {reason}")
                commands.append(StopWorker(worker.resource_id, reason, event.cause_id))
        return commands

    def _idle_workers(self, event: ResourcesChecked) -> list[WorkerCommand]:
        spec = self.settings.spec
        free_total = sum(free for _, free in event.slots.values())
        keep_free = self.settings.redundant * spec.number_of_slots if event.has_requirements else 0
        commands: list[WorkerCommand] = []
        for worker in self.workers(WorkerState.REGISTERED):
            slots, free = event.slots.get(worker.resource_id, (0, 0))
            if slots == 0 or free < slots:  # busy (an answer still coming is ignored)
                worker.idle_since_ms = None
                worker.release_check_pending = False
                continue
            if worker.idle_since_ms is None:
                worker.idle_since_ms = event.now_ms
            if (worker.release_check_pending
                    or event.now_ms - worker.idle_since_ms < self.settings.idle_timeout_ms
                    or free_total - slots < keep_free):
                continue
            free_total -= slots  # a release candidate: the next one must leave enough free
            worker.release_check_pending = True
            commands.append(CheckReleasable(worker.resource_id, event.cause_id))
        return commands

    def _start_workers(self, event: ResourcesChecked) -> list[WorkerCommand]:
        spec = self.settings.spec
        self.held_back = ""
        free_total = sum(free for _, free in event.slots.values())
        wanted = event.missing_slots - free_total
        if event.has_requirements:
            self._initial_pending = False
            wanted += self.settings.redundant * spec.number_of_slots
        elif self._initial_pending:  # once: a worker no job uses is released when idle
            self._initial_pending = False
            wanted = self.settings.initial_workers * spec.number_of_slots - free_total
        plan: list[tuple[WorkerResourceSpec, ResourceProfile | None, int]] = [
            (spec, None, math.ceil(max(0, wanted) / spec.number_of_slots)
             - self._starting(event, None))]
        profile: ResourceProfile | None  # the plan's (None: default slots)
        for profile, missing in sorted(event.missing_resources.items()):
            per_worker = max(1, math.floor(spec.cpu_cores / profile.cpu_cores + 1e-6)) \
                if profile.cpu_cores > 0 else spec.number_of_slots
            starting = self._starting(event, profile) * per_worker
            plan.append((WorkerResourceSpec.for_slots(profile, per_worker), profile,
                         math.ceil(max(0, missing - starting) / per_worker)))
        plan = [(s, p, n) for s, p, n in plan if n > 0]
        if not plan:
            return []
        if self.settings.max_slots is not None:
            registered = sum(slots for slots, _ in event.slots.values())
            # ours whose slots are not in the SlotManager yet: starting, registered without a
            # slot report, or being stopped
            pending = sum(w.spec.number_of_slots for w in self._workers.values()
                          if not event.slots.get(w.resource_id, (0, 0))[0])
            room = self.settings.max_slots - registered - pending
            capped = []
            for worker_spec, profile, n in plan:
                fit = min(n, max(0, room) // worker_spec.number_of_slots)
                room -= fit * worker_spec.number_of_slots
                if fit < n:
                    self.held_back = (f"{n - fit} TaskManager(s) not started: "
                                      f"slotmanager.number-of-slots.max is {self.settings.max_slots}")
                capped.append((worker_spec, profile, fit))
            plan = [(s, p, n) for s, p, n in capped if n > 0]
        if plan and event.now_ms < self._cool_down_until_ms:
            self.held_back = (f"start-up failures exceed "
                              f"{self.settings.max_failure_rate:g}/min; next start in "
                              f"{(self._cool_down_until_ms - event.now_ms) / 1000:.1f} s "
                              f"(last: {self.last_failure})")
            return []
        if plan and self.failures_in_last_minute(event.now_ms) > self.settings.max_failure_rate:
            plan = [(plan[0][0], plan[0][1], 1)]  # one at a time, each after a cool-down
            self._cool_down_until_ms = event.now_ms + self.settings.retry_interval_ms
        commands: list[WorkerCommand] = []
        for worker_spec, profile, n in plan:
            for _ in range(n):
                self._started += 1
                resource_id = ResourceID(f"{self._id_prefix}-{self._started}")
                worker = Worker(resource_id, worker_spec, WorkerState.REQUESTED, event.now_ms,
                                for_profile=profile)
                worker.story.append(f"requested for {profile or 'default slots'} "
                                    f"cause={event.cause_id}")
                self._workers[resource_id] = worker
                commands.append(StartWorker(resource_id, worker_spec, event.cause_id))
        return commands

    def _starting(self, event: ResourcesChecked, profile: ResourceProfile | None) -> int:
        """Workers started for ``profile`` (None: default ones) whose slots are not offered yet:
        still starting, or registered without a slot report."""
        return sum(1 for w in self._workers.values() if w.for_profile == profile and (
            w.state is WorkerState.REQUESTED
            or w.state is WorkerState.REGISTERED and not event.slots.get(w.resource_id, (0, 0))[0]))

    # ---- internals -----------------------------------------------------------------------------

    def _transition(self, worker: Worker, target: WorkerState, now_ms: int, why: str) -> None:
        if target not in _ALLOWED[worker.state]:
            raise IllegalStateTransition(f"worker {worker.resource_id}", worker.state, target,
                                         "\n".join(worker.story))
        worker.story.append(f"{worker.state.value} -> {target.value} {why}")
        worker.state = target
        worker.since_ms = now_ms
        worker.idle_since_ms = None
        worker.release_check_pending = False

    def _record_failure(self, now_ms: int, what: str) -> None:
        self._failures.append(now_ms)
        self.last_failure = what
        self._expire_failures(now_ms)

    def _expire_failures(self, now_ms: int) -> None:
        while self._failures and self._failures[0] <= now_ms - _FAILURE_WINDOW_MS:
            self._failures.popleft()

    # ---- invariants ----------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the invariants; raises AssertionError naming the broken one."""
        for resource_id, worker in self._workers.items():
            where = f"worker {resource_id}: {worker.state}"
            assert worker.resource_id == resource_id, where
            if worker.state is not WorkerState.REGISTERED:
                assert worker.idle_since_ms is None and not worker.release_check_pending, where
            if worker.release_check_pending:
                assert worker.idle_since_ms is not None, where
        if self.settings.max_slots is not None:
            ours = sum(w.spec.number_of_slots for w in self._workers.values())
            assert ours <= self.settings.max_slots, f"{ours} slots started > max"
