"""What the log, metric and web-submission handlers share (``app.state.observability``).

``ObservabilityContext`` holds the JobManager's own log files and the store of uploaded programs;
``parse_task_manager_id`` validates a ``:taskmanagerid`` path parameter; ``not_found_errors``
turns "no such TaskManager" and "no such log file" (raised in-process or across the RPC wire)
into 404 answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from flintlock.runtime.ids import ResourceID
from flintlock.runtime.logs.exceptions import LogFileNotFoundException
from flintlock.runtime.logs.files import LogDirectory
from flintlock.runtime.resourcemanager.exceptions import UnknownTaskExecutorException
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.jar_store import JarStore
from flintlock.runtime.rpc.exceptions import RemoteError

__all__ = [
    "TM_ID",
    "Obs",
    "ObservabilityContext",
    "not_found_errors",
    "observability_context",
    "parse_task_manager_id",
]

#: what a TaskManager id (ResourceID text) may be
TM_ID = re.compile(r"^[A-Za-z0-9._:@\[\]-]{1,256}$")
_NOT_FOUND = ("UnknownTaskExecutorException", "LogFileNotFoundException")


@dataclass(frozen=True)
class ObservabilityContext:
    """Attributes:
        job_manager_logs: the JobManager process's log files (``None``: it has none, e.g. tests).
        jars: programs uploaded with ``POST /jars/upload``.
    """

    job_manager_logs: LogDirectory | None
    jars: JarStore


async def observability_context(request: Request) -> ObservabilityContext:
    """FastAPI dependency: the app's ``ObservabilityContext`` (async: FastAPI runs a sync
    dependency in its thread pool, a thread hand-off per request)."""
    ctx: ObservabilityContext = request.app.state.observability
    return ctx


#: Handler parameter type that injects the app's ``ObservabilityContext``.
Obs = Annotated[ObservabilityContext, Depends(observability_context)]


def parse_task_manager_id(text: str) -> ResourceID:
    """A TaskManager id from a path; 400 when it is not one."""
    if not TM_ID.match(text):
        raise RestHandlerException(
            400, f"Bad request, could not parse path parameter taskmanagerid: {text[:80]!r} is "
                 "not a TaskManager id (see GET /taskmanagers).")
    return ResourceID(text)


@contextmanager
def not_found_errors() -> Iterator[None]:
    """Answer 404 for an unknown TaskManager or log file (local or remote exception)."""
    try:
        yield
    except (UnknownTaskExecutorException, LogFileNotFoundException) as exc:
        raise RestHandlerException(404, str(exc)) from None
    except RemoteError as exc:
        if exc.type_name.rsplit(".", 1)[-1] in _NOT_FOUND:
            raise RestHandlerException(404, exc.remote_message) from None
        raise
