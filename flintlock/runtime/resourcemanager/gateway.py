"""ResourceManagerGateway: registration, slot reports, resource declarations, heartbeats.

Follows Flink ``runtime/resourcemanager/ResourceManagerGateway`` and declarative resource
management (FLIP-138): a JobMaster declares how many slots it needs; the SlotManager allocates free
slots of registered TaskExecutors to it (``TaskExecutorGateway.request_slot``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from flintlock.runtime.clusterframework.resource_profile import ResourceProfile
from flintlock.runtime.ids import AllocationID, JobID, ResourceID, SlotID
from flintlock.runtime.logs.files import LogChunk, LogInfo
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.rpc.messages import Acknowledge
from flintlock.runtime.rpc.service import oneway
from flintlock.runtime.taskexecutor.gateway import SlotReport
from flintlock.runtime.thread_dump import ThreadInfo

__all__ = [
    "PendingTaskManagerInfo",
    "RegistrationResponse",
    "ResourceManagerGateway",
    "ResourceOverview",
    "ResourceRequirements",
    "TaskExecutorRegistration",
    "TaskManagerInfo",
]


@dataclass(frozen=True)
class TaskExecutorRegistration:
    """What a TaskExecutor tells the ResourceManager when it registers.

    Attributes:
        address: RPC address of the TaskExecutor.
        resource_id: its ResourceID.
        number_of_slots: ``taskmanager.numberOfTaskSlots``.
        data_port: port of its partition data server (0 in-process).
        hardware: Flink's ``HardwareDescription``: ``{"cpuCores": int, "physicalMemory": bytes,
            "freeMemory": bytes (the maximum heap), "managedMemory": bytes}``.
        spark: description of its Spark session (``{"master": "local[2]", "version": "4.3.0"}``;
            ``"server"`` names an embedded server that several TaskManagers share).
        cpu_cores: the CPU cores it offers (its total ``ResourceProfile``'s).
        memory: Flink's ``TaskExecutorMemoryConfiguration`` in bytes (``frameworkHeap``,
            ``taskHeap``, ..., ``totalProcessMemory``; ``taskexecutor.process_status``).
        total_resource_profile: what its slots may hold in all (Flink's
            ``totalResourceProfile``): ``cpu_cores`` and its JVM's task heap, task off-heap and
            managed memory (zero memory: unknown, matched on CPU only); None: not accounted.
    """

    address: str
    resource_id: ResourceID
    number_of_slots: int
    data_port: int = 0
    hardware: dict[str, int] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)
    cpu_cores: float = 0.0
    memory: dict[str, int] = field(default_factory=dict)
    total_resource_profile: ResourceProfile | None = None


@dataclass(frozen=True)
class RegistrationResponse:
    """Success (with the registrar's ResourceID) or a rejection with a reason."""

    success: bool
    resource_id: ResourceID | None = None
    reason: str = ""


@dataclass(frozen=True)
class ResourceRequirements:
    """A job's declared need (Flink ``ResourceRequirements``): ``resources`` holds
    ``(ResourceProfile, number of slots)`` pairs; ``UNKNOWN`` asks for default slots. Given only
    ``number_of_slots``, that many default slots."""

    job_id: JobID
    job_master_address: str
    number_of_slots: int = 0
    resources: tuple[tuple[ResourceProfile, int], ...] = ()

    def __post_init__(self) -> None:
        if not self.resources and self.number_of_slots:
            object.__setattr__(self, "resources",
                               ((ResourceProfile.UNKNOWN, self.number_of_slots),))
        object.__setattr__(self, "number_of_slots", sum(n for _, n in self.resources))


@dataclass(frozen=True)
class TaskManagerInfo:
    """One registered TaskExecutor as REST ``/taskmanagers`` shows it.

    ``hardware``, ``spark``, ``cpu_cores`` and ``memory`` are its registration's;
    ``allocated_slots`` holds the job of each slot that is allocated (or being allocated) to a
    job, as the ResourceManager's slot tracker knows it from the slot reports and requests;
    ``allocated_slot_resources`` the resources each of them holds, and ``total_resource`` /
    ``free_resource`` the TaskExecutor's budget and what its slots leave of it (None when it
    registered no total).
    """

    resource_id: ResourceID
    address: str
    data_port: int
    number_of_slots: int
    free_slots: int
    last_heartbeat_ms: int
    hardware: dict[str, int] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)
    cpu_cores: float = 0.0
    memory: dict[str, int] = field(default_factory=dict)
    allocated_slots: tuple[JobID, ...] = ()
    allocated_slot_resources: tuple[ResourceProfile, ...] = ()
    total_resource: ResourceProfile | None = None
    free_resource: ResourceProfile | None = None


@dataclass(frozen=True)
class PendingTaskManagerInfo:
    """A TaskManager an active ResourceManager started that has not registered yet, or is
    stopping (REST ``GET /taskmanagers``' ``pendingTaskManagers``; Flink counts these as the
    active ResourceManager's pending workers but lists none).

    Attributes:
        resource_id: the id it will register with.
        state: ``STARTING`` (process requested, not registered) or ``STOPPING``.
        since_ms: when it entered ``state`` (epoch ms).
        number_of_slots, cpu_cores: what it will offer.
        task_heap_memory, managed_memory: bytes it is sized for (0: the default JVM size).
    """

    resource_id: ResourceID
    state: str
    since_ms: int
    number_of_slots: int
    cpu_cores: int
    task_heap_memory: int = 0
    managed_memory: int = 0


@dataclass(frozen=True)
class ResourceOverview:
    """Counts for REST ``/overview``, and the workers an active ResourceManager is starting."""

    number_of_task_managers: int
    number_of_slots: int
    number_of_free_slots: int
    #: TaskManagers an active ResourceManager has started that have not registered yet
    number_of_pending_task_managers: int = 0
    #: TaskManagers blocked as slow nodes, and their free slots (Flink's ``taskmanagers-blocked``
    #: and ``slots-free-and-blocked``)
    number_of_blocked_task_managers: int = 0
    number_of_free_and_blocked_slots: int = 0
    #: an active ResourceManager's workers that are starting or stopping
    pending_task_managers: tuple[PendingTaskManagerInfo, ...] = ()
    #: why an active ResourceManager starts fewer TaskManagers than jobs need ("" if it does not)
    held_back: str = ""
    #: how many Spark servers (drivers) the registered TaskManagers run subtasks on: embedded
    #: ones (``local[N]``, one per process: the MiniCluster's TaskManagers share one) and remote
    #: ones (one per ``spark.remote`` URL); 0 when there is none or one's Spark is unknown
    spark_servers: int = 0


class ResourceManagerGateway(Protocol):
    async def register_task_executor(
        self, registration: TaskExecutorRegistration, *, timeout: float | None = None
    ) -> RegistrationResponse:
        """Register (or re-register) a TaskExecutor; it then sends its SlotReport. Idempotent."""
        ...

    async def send_slot_report(self, resource_id: ResourceID, slot_report: SlotReport, *,
                               timeout: float | None = None) -> Acknowledge:
        """The TaskExecutor's slots and their allocations (after registration)."""
        ...

    async def register_job_master(
        self, job_id: JobID, job_master_address: str, resource_id: ResourceID
    ) -> RegistrationResponse:
        """Register the JobMaster of ``job_id`` (one per job); starts heartbeats with it."""
        ...

    async def declare_required_resources(self, requirements: ResourceRequirements) -> Acknowledge:
        """Replace the job's declared slot count; the SlotManager allocates or releases."""
        ...

    async def notify_new_blocked_nodes(self, resource_ids: tuple[ResourceID, ...],
                                       duration_s: float, cause: str) -> Acknowledge:
        """These TaskManagers run slow subtasks (a JobMaster's speculative execution): none of
        their free slots goes to any job for ``duration_s`` seconds (Flink
        ``ResourceManagerGateway.notifyNewBlockedNodes``; a later block of the same node
        extends it)."""
        ...

    @oneway
    async def notify_slot_available(
        self, resource_id: ResourceID, slot_id: SlotID, allocation_id: AllocationID,
        version: int = 0,
    ) -> None:
        """A TaskExecutor freed ``slot_id`` (was ``allocation_id``); ``version``: its slot
        table's version without the allocation (``SlotReport.version``)."""
        ...

    @oneway
    async def heartbeat_from_task_manager(self, resource_id: ResourceID, slot_report: SlotReport) -> None:
        """Heartbeat reply from a TaskExecutor, carrying its SlotReport."""
        ...

    @oneway
    async def heartbeat_from_job_manager(self, resource_id: ResourceID) -> None:
        """Heartbeat reply from a JobMaster."""
        ...

    @oneway
    async def disconnect_task_manager(self, resource_id: ResourceID, cause: str) -> None:
        """A TaskExecutor is shutting down: remove it and its slots."""
        ...

    @oneway
    async def disconnect_job_manager(self, job_id: JobID, cause: str) -> None:
        """A JobMaster ended: drop its requirements; its slots are freed by the TaskExecutors."""
        ...

    async def request_task_manager_infos(self) -> tuple[TaskManagerInfo, ...]:
        """All registered TaskExecutors."""
        ...

    async def request_resource_overview(self) -> ResourceOverview:
        """TaskManager and slot counts."""
        ...

    # ---- TaskManager logs and metrics (forwarded to the TaskExecutor) -------------------------

    async def request_task_manager_log_list(self, resource_id: ResourceID) -> tuple[LogInfo, ...]:
        """The log files of TaskManager ``resource_id`` (Flink ``requestTaskManagerLogList``).

        Raises:
            UnknownTaskExecutorException: no TaskExecutor is registered under that id.
        """
        ...

    async def request_task_manager_log(self, resource_id: ResourceID, name: str | None,
                                       start: int, count: int) -> LogChunk:
        """A chunk of one of its log files (Flink ``requestTaskManagerFileUploadByName``).

        Raises:
            UnknownTaskExecutorException: no TaskExecutor is registered under that id.
            LogFileNotFoundException: it serves no such file.
        """
        ...

    async def request_task_manager_metrics(self, resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        """Its metrics. Raises ``UnknownTaskExecutorException`` for an unknown id."""
        ...

    async def request_task_manager_thread_dump(self, resource_id: ResourceID,
                                               max_depth: int) -> tuple[ThreadInfo, ...]:
        """Its threads with up to ``max_depth`` frames each (Flink ``requestThreadDump``).
        Raises ``UnknownTaskExecutorException`` for an unknown id."""
        ...
