"""Savepoint handlers: ``POST /jobs/:jobid/savepoints``, ``GET /jobs/:jobid/savepoints/:triggerid``
and ``POST /jobs/:jobid/stop`` (Flink ``SavepointHandlers.SavepointTriggerHandler``,
``SavepointHandlers.SavepointStatusHandler`` and ``SavepointHandlers.StopWithSavepointHandler``).

Shapes (Flink's wire names):

- ``POST /jobs/:jobid/savepoints``, body (Flink ``SavepointTriggerRequestBody``)::

    {"target-directory": str | null, "cancel-job": bool, "formatType": "CANONICAL" | "NATIVE"
     | null, "triggerId": null}

  202 ``{"request-id": "<32 hex>"}`` (Flink ``TriggerResponse``). Without a target directory the
  JobMaster uses ``state.savepoints.dir``; with neither, the operation fails (its status says so).
- ``POST /jobs/:jobid/stop``, body (Flink ``StopWithSavepointRequestBody``)::

    {"targetDirectory": str | null, "drain": bool, "formatType": ..., "triggerId": null}

  202 ``{"request-id"}``. As Flink's stop-with-savepoint: the sources emit the savepoint's
  barrier and nothing after it; once it completed they end and the job FINISHES, with ``drain:
  true`` after MAX_WATERMARK (every window fires and is published), without it with no further
  output (the savepoint holds the open windows). If the savepoint fails, the job goes on.
- ``GET /jobs/:jobid/savepoints/:triggerid``: Flink ``AsynchronousOperationResult`` of a
  ``SavepointInfo``::

    {"status": {"id": "IN_PROGRESS"}, "operation": null}
    {"status": {"id": "COMPLETED"}, "operation": {"location": "<savepoint directory>"}}
    {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": {"class", "stack-trace",
                                                                    "serialized-throwable"}}}

  A stop answers its status here too (as in Flink).

Both POSTs change the job, so they need ``Authorization: Bearer <security.cluster.secret>``, the
check job submission (``POST /jobs``) makes, before the body is read (401). Then: the job id
(400), the body (400 naming the field: unknown fields, wrong types, an empty directory, a
client-chosen ``triggerId``), the Dispatcher (404 for an unknown job). ``formatType`` is accepted
for Flink's clients and ignored: flintlock writes one format (its checkpoints' files). The status
read needs no secret, like the other reads; 404 for an unknown job or trigger id.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import Request
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
)

from flintlock.runtime.dispatcher.savepoint_operations import UnknownOperationException
from flintlock.runtime.ids import JobID
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.openapi import SECURED
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router, parse_id
from flintlock.runtime.rest.security import authenticate
from flintlock.runtime.rpc.exceptions import RemoteError

__all__ = ["SavepointTriggerRequestBody", "StopWithSavepointRequestBody", "router"]

router = new_router()

_SAVEPOINTS = "/jobs/{jobid}/savepoints"
#: the bodies are a few fields; anything much larger is not one of them
_MAX_BODY_BYTES = 64 * 1024
_TRIGGER_ID_LENGTH = 32


class _Body(BaseModel):
    """Fields both bodies share; unknown fields are refused (a misspelt ``cancel-job`` must not
    silently take a savepoint without cancelling)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    format_type: Literal["CANONICAL", "NATIVE"] | None = Field(
        None, alias="formatType",
        description="Accepted for Flink's clients; flintlock writes one format.")
    trigger_id: None = Field(
        None, alias="triggerId",
        description="Must be null: the Dispatcher chooses the trigger id.")


class SavepointTriggerRequestBody(_Body):
    """``POST /jobs/:jobid/savepoints`` (Flink ``SavepointTriggerRequestBody``)."""

    target_directory: StrictStr | None = Field(
        None, alias="target-directory", min_length=1,
        description="Where to write the savepoint; default state.savepoints.dir.")
    cancel_job: StrictBool = Field(False, alias="cancel-job",
                                   description="Cancel the job after the savepoint.")

    @field_validator("cancel_job", mode="before")
    @classmethod
    def _null_is_false(cls, value: object) -> object:
        return False if value is None else value  # Flink: a null Boolean is false


class StopWithSavepointRequestBody(_Body):
    """``POST /jobs/:jobid/stop`` (Flink ``StopWithSavepointRequestBody``)."""

    target_directory: StrictStr | None = Field(
        None, alias="targetDirectory", min_length=1,
        description="Where to write the savepoint; default state.savepoints.dir.")
    drain: StrictBool = Field(False, description="Emit MAX_WATERMARK before the job finishes: "
                                                 "every window and event-time timer fires.")

    @field_validator("drain", mode="before")
    @classmethod
    def _null_is_false(cls, value: object) -> object:
        return False if value is None else value  # Flink: a null Boolean is false


def _openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    return {"requestBody": {"required": False,
                            "content": {"application/json": {"schema": schema}}}}


def _field_name(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def _validation_message(exc: ValidationError, model: type[BaseModel]) -> str:
    known = ", ".join(f.alias or name for name, f in model.model_fields.items())
    problems = []
    for err in exc.errors():
        name = _field_name(err["loc"])
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown field {name!r} (the fields are {known})")
        elif name == "triggerId":
            problems.append("field 'triggerId' must be null (the trigger id is chosen by the "
                            "cluster)")
        else:
            problems.append(f"field {name!r}: {err['msg']}")
    return "Bad request, invalid request body: " + "; ".join(problems) + "."


async def _parse_body(request: Request, model: type[_Body]) -> Any:
    """The JSON body as ``model`` (an empty body is ``{}``); 400 or 413 for anything else."""
    declared = request.headers.get("content-length", "")
    if declared.strip().isdigit() and int(declared) > _MAX_BODY_BYTES:
        raise RestHandlerException(413, f"The request body exceeds {_MAX_BODY_BYTES} bytes.")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > _MAX_BODY_BYTES:
            raise RestHandlerException(413, f"The request body exceeds {_MAX_BODY_BYTES} bytes.")
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RestHandlerException(400, f"Bad request, the body is not JSON: {exc}.") from None
    if not isinstance(payload, dict):
        raise RestHandlerException(400, "Bad request, the body must be a JSON object.")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise RestHandlerException(400, _validation_message(exc, model)) from None


async def _trigger(ctx: RestContext, job_id: JobID, target_directory: str | None,
                   cancel_job: bool) -> dict[str, Any]:
    trigger_id = await ctx.dispatcher.trigger_savepoint(job_id, target_directory, cancel_job)
    return {"request-id": trigger_id}


@router.post(_SAVEPOINTS, status_code=202, tags=["jobs"],
             openapi_extra={**_openapi_body(SavepointTriggerRequestBody), **SECURED},
             summary="Triggers a savepoint, optionally cancelling the job after it (needs the "
                     "secret).",
             description="Answers a trigger id at once; read the outcome at "
                         "/jobs/:jobid/savepoints/:triggerid.")
async def trigger_savepoint(jobid: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    authenticate(request, ctx.secret, "Triggering a savepoint")
    job_id = parse_id(JobID, "jobid", jobid)
    body: SavepointTriggerRequestBody = await _parse_body(request, SavepointTriggerRequestBody)
    return await _trigger(ctx, job_id, body.target_directory, body.cancel_job)


@router.post("/jobs/{jobid}/stop", status_code=202, tags=["jobs"],
             openapi_extra={**_openapi_body(StopWithSavepointRequestBody), **SECURED},
             summary="Stops a job with a savepoint (needs the secret).",
             description="A savepoint after which the sources end: the job FINISHES (with "
                         "drain=true after MAX_WATERMARK). Answers a trigger id at once; read "
                         "the outcome at /jobs/:jobid/savepoints/:triggerid.")
async def stop_with_savepoint(jobid: str, request: Request, ctx: Ctx) -> dict[str, Any]:
    authenticate(request, ctx.secret, "Stopping a job")
    job_id = parse_id(JobID, "jobid", jobid)
    body: StopWithSavepointRequestBody = await _parse_body(request, StopWithSavepointRequestBody)
    trigger_id = await ctx.dispatcher.stop_with_savepoint(job_id, body.target_directory,
                                                          body.drain)
    return {"request-id": trigger_id}


def _parse_trigger_id(text: str) -> str:
    if len(text) != _TRIGGER_ID_LENGTH or not all(c in "0123456789abcdef" for c in text):
        raise RestHandlerException(
            400, f"Bad request, could not parse path parameter triggerid: {text!r} is not a "
                 f"trigger id ({_TRIGGER_ID_LENGTH} lower-case hex characters).")
    return text


@router.get(_SAVEPOINTS + "/{triggerid}", tags=["jobs"],
            summary="The status of a savepoint (or stop) operation.")
async def savepoint_status(jobid: str, triggerid: str, ctx: Ctx) -> dict[str, Any]:
    job_id = parse_id(JobID, "jobid", jobid)
    trigger_id = _parse_trigger_id(triggerid)
    try:
        return await ctx.dispatcher.savepoint_status(job_id, trigger_id)
    except UnknownOperationException as exc:
        raise RestHandlerException(404, str(exc)) from None
    except RemoteError as exc:
        if exc.type_name.rsplit(".", 1)[-1] == UnknownOperationException.__name__:
            raise RestHandlerException(404, exc.remote_message) from None
        raise
