"""The profiler endpoints of Flink's dashboard, answered for processes that cannot be profiled.

Flink (1.19+, FLIP-375) profiles its JVMs with async-profiler: ``POST /jobmanager/profiler`` and
``POST /taskmanagers/:id/profiler`` (``ProfilingRequestBody`` ``{"mode", "duration"}``) start
a profiling run and answer its ``ProfilingInfo``; ``GET`` on the same paths lists the runs
(``ProfilingInfoList`` ``{"profilingList": [...]}``, newest first, at most
``rest.profiling.history-size`` = 10). flintlock's JobManager and TaskManagers are Python
processes, which async-profiler cannot profile, so every run fails at once:
``{"status": "FAILED", "mode", "triggerTime", "finishedTime" (epoch ms), "duration" (s),
"message": <why>, "outputFile": null}``, and the list shows those failed runs. (Flink with
``rest.profiling.enabled: false`` registers no profiler handlers at all and answers 404; the
dashboard then asks to set that option, which would not help here.) Thread dumps
(``/thread-dump``) show what the threads of a flintlock process are doing.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Annotated, Any, Literal

from fastapi import Depends, Request
from pydantic import BaseModel, Field

__all__ = ["MAX_DURATION_S", "Profiling", "ProfilingHistory", "ProfilingRequest", "profiling"]

#: Flink's ``rest.profiling.history-size`` default
HISTORY_SIZE = 10
#: Flink's ``rest.profiling.duration-max`` default (seconds)
MAX_DURATION_S = 300

_WHY = ("flintlock's {target} is a Python process, which async-profiler (Flink's profiler) "
        "cannot profile; see its thread dump for what its threads are doing")


class ProfilingRequest(BaseModel):
    """Flink ``ProfilingRequestBody``: the async-profiler mode and the duration in seconds."""

    mode: Literal["CPU", "ALLOC", "LOCK", "WALL", "ITIMER"]
    duration: int = Field(gt=0, le=MAX_DURATION_S)


class ProfilingHistory:
    """The (failed) profiling runs asked for, per target (``"JobManager"`` or a TaskManager id),
    newest first, at most ``HISTORY_SIZE`` each. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, deque[dict[str, Any]]] = {}

    def runs(self, target: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(run) for run in self._runs.get(target, ())]

    def request(self, target: str, description: str, request: ProfilingRequest,
                now_ms: int) -> dict[str, Any]:
        """Record and return the ``ProfilingInfo`` of a run of ``target`` (described to the
        user as ``description``) that failed at once."""
        run = {"status": "FAILED", "mode": request.mode, "triggerTime": now_ms,
               "finishedTime": now_ms, "duration": request.duration,
               "message": _WHY.format(target=description), "outputFile": None}
        with self._lock:
            self._runs.setdefault(target, deque(maxlen=HISTORY_SIZE)).appendleft(run)
        return dict(run)


async def profiling(request: Request) -> ProfilingHistory:
    """FastAPI dependency: the app's ``ProfilingHistory`` (created with the first request)."""
    state = request.app.state
    history: ProfilingHistory | None = getattr(state, "profiling", None)
    if history is None:
        history = state.profiling = ProfilingHistory()
    return history


#: Handler parameter type that injects the app's ``ProfilingHistory``.
Profiling = Annotated[ProfilingHistory, Depends(profiling)]
