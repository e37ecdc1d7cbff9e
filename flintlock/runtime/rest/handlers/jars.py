"""Web submission handlers: ``/jars``, ``/jars/upload``, ``DELETE /jars/:jarid``,
``/jars/:jarid/run`` (Flink's jar endpoints, for ``.py`` programs).

``web.submit.enable: false`` answers 403 on all of them (and ``/config`` reports
``web-submit: false``). Upload, run and delete run or change code on the JobManager host, so
they require ``Authorization: Bearer <security.cluster.secret>`` like ``POST /jobs`` (checked
before any byte of the body is read). Uploads are bounded by ``rest.server.max-content-length``.
Storage: ``jar_store``; running: ``jar_runner``.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Annotated, Any

from fastapi import Query, Request

from flintlock.config.options import CLIENT_TIMEOUT, WEB_SUBMIT
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.jar_runner import JarRunException, parse_run_request, run_program
from flintlock.runtime.rest.jar_store import JarNotFoundException, UploadRejectedException
from flintlock.runtime.rest.multipart import MultipartError, boundary_of, parse_multipart
from flintlock.runtime.rest.observability import Obs
from flintlock.runtime.rest.routing import Ctx, RestContext, new_router

__all__ = ["router"]

log = logging.getLogger(__name__)

router = new_router()

#: Flink's form field of the uploaded file
UPLOAD_FIELD = "jarfile"

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object", "required": [UPLOAD_FIELD],
            "properties": {UPLOAD_FIELD: {"type": "string", "format": "binary",
                                          "description": "The .py program."}},
        }}},
    }
}


def _check_enabled(ctx: RestContext) -> None:
    if not ctx.configuration.get(WEB_SUBMIT):
        raise RestHandlerException(
            403, "Web submission is disabled on this cluster (web.submit.enable: false); "
                 "submit with `flintlock run -m <host:port>` instead.")


def _authenticate(request: Request, ctx: RestContext) -> None:
    _check_enabled(ctx)
    challenge = {"WWW-Authenticate": 'Bearer realm="flintlock"'}
    if ctx.secret is None:
        raise RestHandlerException(
            401, "Web submission needs the cluster's security.cluster.secret, and this cluster "
                 "has none.", challenge)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode("utf-8"), ctx.secret.encode("utf-8")
    ):
        raise RestHandlerException(
            401, "Uploading, running and deleting programs requires the header "
                 "'Authorization: Bearer <cluster secret>' (security.cluster.secret; for "
                 "`flintlock cluster start` the file 'secret' in its state directory).", challenge)


async def _read_body(request: Request, limit: int) -> bytes:
    too_large = RestHandlerException(
        413, f"The upload exceeds rest.server.max-content-length ({limit} bytes).")
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _not_found(exc: JarNotFoundException) -> RestHandlerException:
    return RestHandlerException(404, str(exc))


@router.get("/jars", tags=["jars"], summary="The uploaded programs.")
async def list_jars(request: Request, ctx: Ctx, obs: Obs) -> dict[str, Any]:
    _check_enabled(ctx)
    programs = await run_blocking(obs.jars.programs)
    server = request.scope.get("server") or ("127.0.0.1", 0)
    return {
        "address": f"http://{server[0]}:{server[1]}",
        "files": [
            {"id": p.id, "name": p.name, "uploaded": p.uploaded_ms,
             "entry": [{"name": p.name, "description": "runs the program's main like "
                                                       "`flintlock run -d`"}]}
            for p in programs
        ],
    }


@router.post("/jars/upload", tags=["jars"], openapi_extra=_UPLOAD_BODY,
             summary="Uploads a .py program (multipart field 'jarfile'; needs the secret).")
async def upload_jar(request: Request, ctx: Ctx, obs: Obs) -> dict[str, Any]:
    _authenticate(request, ctx)
    try:
        boundary = boundary_of(request.headers.get("content-type"))
        parts = parse_multipart(await _read_body(request, ctx.max_content_length), boundary)
    except MultipartError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}.") from None
    files = [p for p in parts if p.name == UPLOAD_FIELD and p.filename is not None]
    if not files:
        raise RestHandlerException(
            400, f"Bad request: no file part named '{UPLOAD_FIELD}' (curl -F "
                 f"'{UPLOAD_FIELD}=@program.py' .../jars/upload).")
    try:
        stored = await run_blocking(obs.jars.save, files[0].filename or "", files[0].data)
    except UploadRejectedException as exc:
        raise RestHandlerException(400, str(exc)) from None
    log.info("Uploaded program %s (%d bytes)", stored.id, len(files[0].data))
    return {"filename": str(stored.path), "status": "success"}


@router.delete("/jars/{jarid}", tags=["jars"], summary="Deletes an uploaded program.")
async def delete_jar(jarid: str, request: Request, ctx: Ctx, obs: Obs) -> dict[str, Any]:
    _authenticate(request, ctx)
    try:
        await run_blocking(obs.jars.delete, jarid)
    except JarNotFoundException as exc:
        raise _not_found(exc) from None
    return {}


@router.post("/jars/{jarid}/run", tags=["jars"],
             summary="Runs an uploaded program's main against this cluster (needs the secret).")
async def run_jar(
    jarid: str, request: Request, ctx: Ctx, obs: Obs,
    program_arg: Annotated[str | None, Query(alias="programArg")] = None,
    parallelism: Annotated[int | None, Query()] = None,
    entry_class: Annotated[str | None, Query(alias="entry-class")] = None,
) -> dict[str, Any]:
    _authenticate(request, ctx)
    try:
        program = await run_blocking(obs.jars.get, jarid)
    except JarNotFoundException as exc:
        raise _not_found(exc) from None
    raw = await _read_body(request, 1 << 20)
    try:
        body = json.loads(raw) if raw.strip() else None
        run_request = parse_run_request(body, program_arg, parallelism)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RestHandlerException(400, f"Bad request: the body is not JSON ({exc}).") from None
    except ValueError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}.") from None
    host, port = request.scope.get("server") or ("127.0.0.1", 8081)
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        job_id = await run_program(program.path, run_request, address, ctx.secret,
                                   float(ctx.configuration.get(CLIENT_TIMEOUT)))
    except JarRunException as exc:
        raise RestHandlerException(400, str(exc)) from None
    log.info("job=%s submitted by program %s", job_id, program.id)
    return {"jobid": str(job_id)}
