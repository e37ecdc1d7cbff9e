"""Streaming handlers: ``/jobs/:jobid/vertices/:vid/backpressure`` and ``/watermarks``, and the
collect client's ``POST /jobs/:jobid/coordinators/:operatorid``.

Shapes (Flink ``JobVertexBackPressureInfo`` and ``MetricCollectionResponseBody``):

- backpressure: ``{"status": "ok", "backpressureLevel": "ok|low|high", "end-timestamp": ms,
  "subtasks": [{"subtask", "attempt-number", "backpressureLevel", "ratio", "idleRatio",
  "busyRatio"}]}``; ratios are the subtask's ``backPressuredTimeMsPerSecond`` /
  ``idleTimeMsPerSecond`` / ``busyTimeMsPerSecond`` over 1000 from its newest live report (0 for a
  subtask that does not run or reports nothing: BATCH subtasks); the vertex level is its worst
  subtask's (Flink ``JobVertexBackPressureHandler``).
- watermarks: ``[{"id": "<subtask>.currentInputWatermark", "value": "<ms>"}]`` per subtask,
  ``Long.MIN_VALUE`` before the first watermark (Flink ``JobVertexWatermarksHandler``).
- coordinators (Flink ``ClientCoordinationHandler``, used by ``execute_and_collect`` on a
  STREAMING job): request ``{"offset": n}`` (batches received so far); response ``{"offset": k,
  "batches": [base64 Arrow IPC file, ...], "end": bool, "failure": str, "jobStatus": str}``.
  Flink wraps a serialized Java request/response in ``serializedCoordinationRequest`` /
  ``serializedCoordinationResult``; flintlock's are JSON (nothing is unpickled). The rows are the
  job's data, so the request needs ``Authorization: Bearer <security.cluster.secret>`` as a job
  submission does (401). 400 for a malformed request or an offset outside what was handed out,
  404 for an unknown job.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import BaseModel, Field

from flintlock.runtime.ids import JobID
from flintlock.runtime.metrics.live_task_metrics import MIN_WATERMARK_METRIC, backpressure_level
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.handlers.vertices import find_vertex
from flintlock.runtime.rest.openapi import SECURED
from flintlock.runtime.rest.routing import Ctx, new_router, parse_id
from flintlock.runtime.rest.security import authenticate

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


class CoordinationRequest(BaseModel):
    """A collect client's request: how many result batches it has received."""

    offset: int = Field(ge=0, description="batches received so far")


@router.post("/jobs/{jobid}/coordinators/{operatorid}", tags=["jobs"], openapi_extra=SECURED,
             summary="Fetch the next results of a STREAMING job's collect sink.")
async def coordination_request(jobid: str, operatorid: str, body: CoordinationRequest,
                               request: Request, ctx: Ctx) -> dict[str, Any]:
    authenticate(request, ctx.secret, "Fetching a job's collected rows")
    job_id = parse_id(JobID, "jobid", jobid)
    try:
        return await ctx.dispatcher.deliver_coordination_request(
            job_id, operatorid, {"offset": body.offset})
    except ValueError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}") from None
