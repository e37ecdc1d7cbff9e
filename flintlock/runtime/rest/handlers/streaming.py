"""Streaming vertex handlers: ``/jobs/:jobid/vertices/:vid/backpressure`` and ``/watermarks``.

Shapes (Flink ``JobVertexBackPressureInfo`` and ``MetricCollectionResponseBody``):

- backpressure: ``{"status": "ok", "backpressureLevel": "ok|low|high", "end-timestamp": ms,
  "subtasks": [{"subtask", "attempt-number", "backpressureLevel", "ratio", "idleRatio",
  "busyRatio"}]}``; ratios are the subtask's ``backPressuredTimeMsPerSecond`` /
  ``idleTimeMsPerSecond`` / ``busyTimeMsPerSecond`` over 1000 from its newest live report (0 for a
  subtask that does not run or reports nothing: BATCH subtasks); the vertex level is its worst
  subtask's (Flink ``JobVertexBackPressureHandler``).
- watermarks: ``[{"id": "<subtask>.currentInputWatermark", "value": "<ms>"}]`` per subtask,
  ``Long.MIN_VALUE`` before the first watermark (Flink ``JobVertexWatermarksHandler``).
"""

from __future__ import annotations

from typing import Any

from flintlock.runtime.metrics.live_task_metrics import MIN_WATERMARK_METRIC, backpressure_level
from flintlock.runtime.rest.handlers.vertices import find_vertex
from flintlock.runtime.rest.routing import Ctx, new_router

__all__ = ["router"]

router = new_router()

_VERTEX = "/jobs/{jobid}/vertices/{vertexid}"
_LEVELS = ("ok", "low", "high")


@router.get(_VERTEX + "/backpressure", tags=["jobs"],
            summary="Back pressure of a vertex's subtasks (share of time waiting for credit).")
async def vertex_backpressure(jobid: str, vertexid: str, ctx: Ctx) -> dict[str, Any]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    subtasks = []
    for e in sorted(vertex.subtasks, key=lambda s: s.subtask_index):
        live = e.live
        ratio = live.back_pressured_ms_per_second / 1000 if live else 0.0
        subtasks.append({
            "subtask": e.subtask_index, "attempt-number": e.attempt_number,
            "backpressureLevel": backpressure_level(ratio), "ratio": round(ratio, 4),
            "idleRatio": round(live.idle_ms_per_second / 1000, 4) if live else 0.0,
            "busyRatio": round(live.busy_ms_per_second / 1000, 4) if live else 0.0,
        })
    worst = max((_LEVELS.index(s["backpressureLevel"]) for s in subtasks), default=0)
    return {"status": "ok", "backpressureLevel": _LEVELS[worst], "end-timestamp": ctx.now_ms(),
            "subtasks": subtasks}


@router.get(_VERTEX + "/watermarks", tags=["jobs"],
            summary="The current input watermark of every subtask of a vertex.")
async def vertex_watermarks(jobid: str, vertexid: str, ctx: Ctx) -> list[dict[str, str]]:
    _graph, vertex = await find_vertex(ctx, jobid, vertexid)
    out = []
    for e in sorted(vertex.subtasks, key=lambda s: s.subtask_index):
        mark = e.live.input_watermark if e.live and e.live.input_watermark is not None \
            else MIN_WATERMARK_METRIC
        out.append({"id": f"{e.subtask_index}.currentInputWatermark", "value": str(mark)})
    return out
