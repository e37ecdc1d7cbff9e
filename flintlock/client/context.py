"""What the CLI tells a program it runs: overrides, progress display, plan-only mode.

``flintlock run -p 4 -D key=value program.py`` runs the program's main in this process inside
``client_context(...)``; the program's ``StreamExecutionEnvironment`` reads
``current_overrides()`` and every ``execute()`` goes through ``flintlock.client.executor``, which
reads ``current_context()`` (Flink's ``StreamContextEnvironment``). Outside the CLI the context is
empty: no overrides, progress shown when stderr is a terminal.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from flintlock.config import Configuration
from flintlock.runtime.jobgraph.job_graph import JobGraph

__all__ = [
    "ClientContext",
    "ProgramPlanCaptured",
    "client_context",
    "current_context",
    "current_overrides",
]


class ProgramPlanCaptured(BaseException):
    """Raised by ``execute()`` in plan-only mode (``flintlock info``) to stop the program.

    A BaseException so that a program's ``except Exception`` does not swallow it.
    """


@dataclass
class ClientContext:
    """Settings for the program's ``execute()`` calls.

    Attributes:
        overrides: configuration from the command line (``-p`` as ``parallelism.default``, ``-D``).
        show_progress: live progress bars; ``None`` = when stderr is a terminal.
        capture_plans: in plan-only mode, the JobGraphs of ``execute()`` calls are appended here
            and no job runs.
        detached: submit and return without waiting (``flintlock run -d``).
        submitted: JobIDs submitted under this context, in order.
        embedded: in an application cluster, the executor that submits to its own Dispatcher
            (``flintlock.client.application.EmbeddedExecutor``); None elsewhere.
    """

    overrides: Configuration = field(default_factory=Configuration)
    show_progress: bool | None = None
    capture_plans: list[JobGraph] | None = None
    detached: bool = False
    submitted: list[str] = field(default_factory=list)
    embedded: Any = None

    def progress_enabled(self) -> bool:
        """Whether attached runs show progress bars: as set, else when stderr is a terminal."""
        return self.show_progress if self.show_progress is not None else sys.stderr.isatty()


_CONTEXT: contextvars.ContextVar[ClientContext | None] = contextvars.ContextVar(
    "flintlock_client_context", default=None
)


def current_context() -> ClientContext:
    ctx = _CONTEXT.get()
    return ctx if ctx is not None else ClientContext()


def current_overrides() -> Configuration:
    """The command line's configuration overrides (empty outside the CLI)."""
    return current_context().overrides


@contextmanager
def client_context(context: ClientContext) -> Iterator[ClientContext]:
    token = _CONTEXT.set(context)
    try:
        yield context
    finally:
        _CONTEXT.reset(token)
