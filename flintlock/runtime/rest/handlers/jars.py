"""Web submission handlers: ``/jars``, ``/jars/upload``, ``DELETE /jars/:jarid``,
``/jars/:jarid/run`` (Flink's jar endpoints, for ``.py`` programs).

``web.submit.enable: false`` answers 403 on all of them (and ``/config`` reports
``web-submit: false``). Upload, run and delete run or change code on the JobManager host, so
they require ``Authorization: Bearer <security.cluster.secret>`` like ``POST /jobs`` (checked
before any byte of the body is read). Uploads are bounded by ``rest.server.max-content-length``
(413 once more was sent, before more is read) and streamed: the body is parsed as it arrives
(``multipart.FilePartParser``, in a worker thread, a batch of ``_UPLOAD_BATCH_BYTES`` at a time)
and the program written to a temporary file in the store's directory, renamed into place when
complete and valid (``jar_store.ProgramUpload``). Storage: ``jar_store``; running: ``jar_runner``.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import Query, Request

from flintlock.config.options import CLIENT_TIMEOUT, WEB_SUBMIT
from flintlock.runtime.concurrency import run_blocking
from flintlock.runtime.net.ssl_utils import rest_client_settings, rest_scheme
from flintlock.runtime.rest.errors import RestHandlerException
from flintlock.runtime.rest.jar_runner import JarRunException, parse_run_request, run_program
from flintlock.runtime.rest.jar_store import (
    JarNotFoundException,
    JarStore,
    ProgramUpload,
    StoredProgram,
    UploadRejectedException,
)
from flintlock.runtime.rest.multipart import FilePartParser, MultipartError, boundary_of
from flintlock.runtime.rest.observability import Obs
from flintlock.runtime.rest.openapi import SECURED
from flintlock.runtime.rest.routing import (
    Ctx,
    RestContext,
    check_declared_length,
    new_router,
    read_body,
    too_large,
)
from flintlock.runtime.rest.security import authenticate

__all__ = ["router"]

log = logging.getLogger(__name__)

router = new_router()

#: Flink's form field of the uploaded file
UPLOAD_FIELD = "jarfile"
#: body bytes gathered on the event loop before a worker thread parses and writes them
_UPLOAD_BATCH_BYTES = 256 * 1024

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
    authenticate(request, ctx.secret, "Uploading, running and deleting programs")


_UPLOAD = "The upload"


async def _receive_program(request: Request, store: JarStore,
                           limit: int) -> tuple[StoredProgram, int]:
    """Stream the multipart body of an upload into ``store`` (see the module docstring).

    Returns:
        The stored program and its size in bytes.

    Raises:
        RestHandlerException: 400 for a body that is not multipart/form-data or has no file
            part named ``jarfile``; 413 past ``limit`` bytes.
        UploadRejectedException: the file is not a non-empty UTF-8 ``.py`` program.
    """
    try:
        boundary = boundary_of(request.headers.get("content-type"))
    except MultipartError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}.") from None
    check_declared_length(request, limit, _UPLOAD)
    uploads: list[ProgramUpload] = []

    def open_sink(filename: str) -> ProgramUpload:  # in the worker thread
        uploads.append(store.begin_upload(filename))
        return uploads[0]

    parser = FilePartParser(boundary, UPLOAD_FIELD, open_sink)
    try:
        batch: list[bytes] = []
        batched = size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit, _UPLOAD)
            batch.append(chunk)
            batched += len(chunk)
            if batched >= _UPLOAD_BATCH_BYTES:
                await run_blocking(parser.feed, batch)
                batch, batched = [], 0
        await run_blocking(parser.feed, batch)
        if parser.finish() is None or not uploads:
            raise RestHandlerException(
                400, f"Bad request: no file part named '{UPLOAD_FIELD}' (curl -F "
                     f"'{UPLOAD_FIELD}=@program.py' .../jars/upload).")
        return await run_blocking(uploads[0].commit), parser.file_bytes
    except MultipartError as exc:
        raise RestHandlerException(400, f"Bad request: {exc}.") from None
    finally:
        for upload in uploads:  # after commit: nothing; else: remove the partial file
            upload.abort()  # close and unlink: short enough for the loop, and runs when cancelled


def _not_found(exc: JarNotFoundException) -> RestHandlerException:
    return RestHandlerException(404, str(exc))


@router.get("/jars", tags=["jars"], summary="The uploaded programs.")
async def list_jars(request: Request, ctx: Ctx, obs: Obs) -> dict[str, Any]:
    _check_enabled(ctx)
    programs = await run_blocking(obs.jars.programs)
    server = request.scope.get("server") or ("127.0.0.1", 0)
    return {
        "address": f"{rest_scheme(ctx.configuration)}://{server[0]}:{server[1]}",
        "files": [
            {"id": p.id, "name": p.name, "uploaded": p.uploaded_ms,
             "entry": [{"name": p.name, "description": "runs the program's main like "
                                                       "`flintlock run -d`"}]}
            for p in programs
        ],
    }


@router.post("/jars/upload", tags=["jars"], openapi_extra={**_UPLOAD_BODY, **SECURED},
             summary="Uploads a .py program (multipart field 'jarfile'; needs the secret).")
async def upload_jar(request: Request, ctx: Ctx, obs: Obs) -> dict[str, Any]:
    _authenticate(request, ctx)
    try:
        stored, size = await _receive_program(request, obs.jars, ctx.max_content_length)
    except UploadRejectedException as exc:
        raise RestHandlerException(400, str(exc)) from None
    log.info("Uploaded program %s (%d bytes)", stored.id, size)
    return {"filename": str(stored.path), "status": "success"}


@router.delete("/jars/{jarid}", tags=["jars"], openapi_extra=SECURED,
               summary="Deletes an uploaded program (needs the secret).")
async def delete_jar(jarid: str, request: Request, ctx: Ctx, obs: Obs) -> dict[str, Any]:
    _authenticate(request, ctx)
    try:
        await run_blocking(obs.jars.delete, jarid)
    except JarNotFoundException as exc:
        raise _not_found(exc) from None
    return {}


@router.post("/jars/{jarid}/run", tags=["jars"], openapi_extra=SECURED,
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
    raw = await read_body(request, 1 << 20, _UPLOAD)
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
                                   float(ctx.configuration.get(CLIENT_TIMEOUT)),
                                   rest_client_settings(ctx.configuration))
    except JarRunException as exc:
        raise RestHandlerException(400, str(exc)) from None
    log.info("job=%s submitted by program %s", job_id, program.id)
    return {"jobid": str(job_id)}
