"""Configuration of the active ResourceManager (fact sheet 10; Flink ``ResourceManagerOptions``).

Registered in ``OPTIONS`` when ``flintlock.config.options`` is imported. Keys, defaults and meaning
follow Flink's ``ResourceManagerOptions``; ``resourcemanager.type`` and ``resourcemanager.process.*``
are flintlock's own (Flink picks its driver from the deployment target: YARN, Kubernetes).
"""

from __future__ import annotations

from typing import Any

from flintlock.config.options import (
    _at_least,
    _enum,
    _float,
    _str,
    nonneg_int,
    option,
    parse_duration_s,
    pos_int,
)

__all__ = [
    "RM_PROCESS_PYTHON",
    "RM_START_WORKER_MAX_FAILURE_RATE",
    "RM_START_WORKER_RETRY_INTERVAL",
    "RM_TASK_MANAGER_REGISTRATION_TIMEOUT",
    "RM_TASK_MANAGER_TIMEOUT",
    "RM_TYPE",
    "SLOTMANAGER_MAX_SLOTS",
    "SLOTMANAGER_REDUNDANT_TASK_MANAGERS",
    "TM_RESOURCE_ID",
]


def _max_slots(value: Any) -> int | None:
    """A positive slot count, or unset (no limit)."""
    return None if value is None or str(value).strip() == "" else pos_int(value)


RM_TYPE = option(
    "resourcemanager.type", "standalone", _enum("standalone", "active"),
    "standalone: the ResourceManager only distributes the slots of TaskManagers started by the "
    "user (Flink's StandaloneResourceManager); active: it starts TaskManager processes on this "
    "host when jobs need slots and stops idle ones (Flink's ActiveResourceManager with a "
    "process driver; flintlock's own key).")
RM_TASK_MANAGER_TIMEOUT = option(
    "resourcemanager.taskmanager-timeout", 30.0, _at_least(parse_duration_s, 0.0),
    "An active ResourceManager stops a TaskManager it started once all its slots have been "
    "free this long and it holds no result partitions still needed.")
RM_TASK_MANAGER_REGISTRATION_TIMEOUT = option(
    "resourcemanager.taskmanager-registration.timeout", 300.0, _at_least(parse_duration_s, 1e-3),
    "A started TaskManager that has not registered within this long is stopped and counted as "
    "a start-up failure.")
RM_START_WORKER_MAX_FAILURE_RATE = option(
    "resourcemanager.start-worker.max-failure-rate", 10.0, _at_least(_float, 0.0),
    "TaskManager start-up failures per minute above which new TaskManagers are started only "
    "every resourcemanager.start-worker.retry-interval.")
RM_START_WORKER_RETRY_INTERVAL = option(
    "resourcemanager.start-worker.retry-interval", 3.0, _at_least(parse_duration_s, 0.0),
    "The pause between TaskManager starts while start-up failures exceed the maximum rate.")
SLOTMANAGER_MAX_SLOTS = option(
    "slotmanager.number-of-slots.max", None, _max_slots,
    "Most slots of all TaskManagers together that an active ResourceManager starts; jobs needing "
    "more wait for slots. Unset: this host's cores for TaskManager processes on this host (a "
    "slot runs on a Spark core; more would oversubscribe the host).")
SLOTMANAGER_REDUNDANT_TASK_MANAGERS = option(
    "slotmanager.redundant-taskmanager-num", 0, nonneg_int,
    "Extra TaskManagers an active ResourceManager keeps started while jobs run, so a lost "
    "TaskManager's tasks restart without waiting for a new one.")
RM_INITIAL_TASK_MANAGERS = option(
    "resourcemanager.initial-task-managers", 0, nonneg_int,
    "TaskManagers an active ResourceManager starts as soon as it starts, before any job "
    "declares slots; one that no job uses is stopped after resourcemanager.taskmanager-timeout "
    "(flintlock's own key). Application and per-job clusters default to 1, so their first "
    "TaskManager starts while main() runs or the job is submitted.")
TM_RESOURCE_ID = option(
    "taskmanager.resource-id", None, _str,
    "The TaskManager's ResourceID (default: generated from its host and port); an active "
    "ResourceManager sets it for the TaskManagers it starts.")
RM_PROCESS_PYTHON = option(
    "resourcemanager.process.python", None, _str,
    "The Python interpreter an active ResourceManager starts TaskManager processes with "
    "(default: the JobManager's own; flintlock's own key).")
