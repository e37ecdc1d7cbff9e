"""``POST /jobs``: authenticated job submission (format: ``flintlock.runtime.rest.submission``).

Order of checks, so that nothing from an unauthenticated or oversized request is processed:
the bearer secret (401, before any body byte is read), the declared ``Content-Length`` (413),
the streamed size (413), the multipart envelope and ``request`` JSON (400), the client's versions
(400), then the restricted unpickling of the JobGraph (400) and ``DispatcherGateway.submit_job``
(409 duplicate, 400 refused).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import Request

from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.multipart import MultipartError, boundary_of, parse_multipart
from flintlock.runtime.rest.openapi import SECURED
from flintlock.runtime.rest.routing import Ctx, new_router, read_body
from flintlock.runtime.rest.security import authenticate
from flintlock.runtime.rest.submission import (
    JOB_GRAPH_FILE_NAME,
    JobGraphDecodeError,
    check_client_versions,
    deserialize_job_graph,
    parse_submission_request,
)

__all__ = ["router"]

log = logging.getLogger(__name__)

router = new_router()

_OPENAPI_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["request", JOB_GRAPH_FILE_NAME],
                    "properties": {
                        "request": {
                            "type": "string",
                            "description": 'JSON {"jobGraphFileName": "job.graph", "client": '
                                           '{"python": ..., "pyspark": ..., "flintlock": ...}}',
                        },
                        JOB_GRAPH_FILE_NAME: {
                            "type": "string", "format": "binary",
                            "description": "serialize_job_graph(job_graph)",
                        },
                    },
                }
            }
        },
    }
}


@router.post("/jobs", status_code=202, tags=["jobs"], openapi_extra={**_OPENAPI_BODY, **SECURED},
             summary="Submits a job (multipart: request JSON + job.graph; needs the secret).")
async def submit_job(request: Request, ctx: Ctx) -> dict[str, Any]:
    authenticate(request, ctx.secret)
    try:
        boundary = boundary_of(request.headers.get("content-type"))
    except MultipartError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}.") from None
    body = await read_body(request, ctx.max_content_length)
    try:
        parts = parse_multipart(body, boundary)
    except MultipartError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}.") from None

    fields = [p for p in parts if p.name == "request" and p.filename is None]
    if not fields:
        fields = [p for p in parts if p.name == "request"]
    if not fields:
        raise RestHandlerException(400, "Bad request: the form field 'request' is missing.")
    try:
        payload = json.loads(fields[0].data.decode("utf-8"))
        submission = parse_submission_request(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RestHandlerException(
            400, f"Bad request: the form field 'request' is not JSON ({exc}).") from None
    except ValueError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}") from None
    try:
        check_client_versions(submission.client_versions)
    except ValueError as exc:
        raise RestHandlerException(400, str(exc)) from None

    name = submission.job_graph_file_name
    files = [p for p in parts if p.filename == name] or [
        p for p in parts if p.name == name and p is not fields[0]
    ]
    if not files:
        raise RestHandlerException(
            400, f"Bad request: no file part named {name!r} (the request's jobGraphFileName).")
    try:
        job_graph = deserialize_job_graph(files[0].data)
    except JobGraphDecodeError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}") from None

    log.info("job=%s submitted over REST (%s)", job_graph.job_id, job_graph.name)
    await ctx.dispatcher.submit_job(job_graph)
    return {"jobUrl": f"/jobs/{job_graph.job_id}"}
