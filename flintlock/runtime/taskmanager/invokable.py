"""The contract between a Task thread and the code it runs (Flink ``TaskInvokable``).

A ``Task`` loads ``TaskDeploymentDescriptor.invokable_class`` (``"module:Class"``), constructs it
with a ``RuntimeEnvironment`` and calls ``invoke()`` in the task thread. ``cancel()`` is called from
another thread and must make ``invoke()`` return or raise promptly (for Spark tasks: interrupt the
attempt's Spark tag). Spark invokables live in ``flintlock.runtime.spark``; test invokables that
process no data (no-op, blocking, failing) live in ``flintlock.testing.invokables``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from flintlock.runtime.deployment import TaskDeploymentDescriptor
from flintlock.runtime.taskmanager.task_execution_state import TaskResult

__all__ = [
    "RuntimeEnvironment",
    "TaskCancelledError",
    "TaskInvokable",
    "load_invokable_class",
    "print_line",
]

#: shared by every print sink of the process
_STDOUT_LOCK = threading.Lock()


def print_line(line: str) -> None:
    """Write ``line`` and its newline to stdout in one write, under a lock the process's print
    sinks share, so the lines of subtasks printing at the same time never run into each other
    (Flink's ``PrintStream.println`` is synchronized; ``print`` writes the text and the newline
    separately)."""
    with _STDOUT_LOCK:
        sys.stdout.write(line + "\n")


class TaskCancelledError(Exception):
    """Raised inside ``invoke()`` when the task was cancelled; the Task reports CANCELED."""


@dataclass
class RuntimeEnvironment:
    """What an invokable sees of its TaskManager (Flink ``RuntimeEnvironment``).

    Attributes:
        tdd: the deployment descriptor.
        services: TaskManager-wide services by name: ``"spark"`` -> a ``SparkSessionProvider``
            (``.get()`` returns the process's SparkSession), ``"shuffle_dir"`` -> the local partition
            storage directory (str). Test invokables may need none.
        cancelled: set when the task is cancelled.
        configuration: the job's effective configuration (Flink keys -> strings).
        print_fn: where print sinks write lines (the TaskManager's stdout by default,
            ``print_line``).
        checkpoint_responder: sends checkpoint acknowledgements and declines to the JobMaster
            (``spark.task_checkpoints.CheckpointResponder``); None where there is none (tests).
    """

    tdd: TaskDeploymentDescriptor
    services: Mapping[str, Any] = field(default_factory=dict)
    cancelled: threading.Event = field(default_factory=threading.Event)
    configuration: Mapping[str, str] = field(default_factory=dict)
    print_fn: Callable[[str], None] = print_line
    checkpoint_responder: Any = None


@runtime_checkable
class TaskInvokable(Protocol):
    """Runs one execution attempt; constructed as ``cls(environment)``."""

    def invoke(self) -> TaskResult:
        """Run to the end of input and return what was produced; raise on failure."""
        ...

    def cancel(self) -> None:
        """Thread-safe; make ``invoke()`` stop promptly (it then raises TaskCancelledError)."""
        ...


def load_invokable_class(spec: str) -> type[Any]:
    """Import ``"module:Class"``; raises ``ImportError``/``AttributeError`` naming ``spec``."""
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ImportError(f"invalid invokable class {spec!r}: expected 'module:Class'")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attr)  # type: ignore[no-any-return]
    except AttributeError:
        raise AttributeError(f"invokable class {spec!r}: module has no attribute {attr!r}") from None
