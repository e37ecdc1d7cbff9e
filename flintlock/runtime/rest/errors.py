"""REST errors: every failure becomes Flink's ``{"errors": ["..."]}`` with the right status code.

- ``RestHandlerException(status, message)``: raised by handlers for bad input (400, 401, 404, 413).
- Dispatcher errors (in-process, or as ``RemoteError`` over RPC): unknown job -> 404, duplicate
  submission -> 409, other submission errors -> 400; an unreachable or slow dispatcher -> 503.
- Routing: unknown path -> 404, wrong method -> 405; request validation -> 400 (Flink has no 422).
- Anything else is an internal error: 500 with Flink's "Internal server error." and the trace.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from flintlock.runtime.dispatcher.exceptions import (
    DuplicateJobSubmissionException,
    FlinkJobNotFoundException,
    JobSubmissionException,
)
from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RemoteError, RpcTimeout

__all__ = ["RestHandlerException", "error_body", "error_response"]

log = logging.getLogger(__name__)

#: Remote exception class names (last dotted part) -> status code; most specific first.
_REMOTE_STATUS = (
    ("FlinkJobNotFoundException", 404),
    ("DuplicateJobSubmissionException", 409),
    ("JobSubmissionException", 400),
)


class RestHandlerException(Exception):
    """A handler's answer with an error status (Flink ``RestHandlerException``)."""

    def __init__(self, status_code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.headers = headers or {}


def error_body(*errors: str) -> dict[str, list[str]]:
    return {"errors": list(errors)}


def _validation_messages(exc: RequestValidationError) -> list[str]:
    messages = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        where = f"{loc[0]} parameter {'.'.join(loc[1:])}" if len(loc) > 1 else ".".join(loc)
        messages.append(f"Bad request, invalid {where}: {err.get('msg', 'invalid value')}")
    return messages or ["Bad request."]


def _classify(exc: BaseException) -> tuple[int, list[str], dict[str, str]]:
    if isinstance(exc, RestHandlerException):
        return exc.status_code, [exc.message], exc.headers
    if isinstance(exc, RequestValidationError):
        return 400, _validation_messages(exc), {}
    if isinstance(exc, StarletteHTTPException):
        headers = dict(exc.headers or {})
        return exc.status_code, [str(exc.detail)], headers
    if isinstance(exc, FlinkJobNotFoundException):
        return 404, [str(exc)], {}
    if isinstance(exc, DuplicateJobSubmissionException):
        return 409, [str(exc)], {}
    if isinstance(exc, JobSubmissionException):
        return 400, [str(exc)], {}
    if isinstance(exc, RemoteError):
        simple = exc.type_name.rsplit(".", 1)[-1]
        for name, status in _REMOTE_STATUS:
            if simple == name:
                return status, [exc.remote_message], {}
    if isinstance(exc, (RpcTimeout, RecipientUnreachable)):
        return 503, [f"The JobManager's dispatcher is not available: {exc}"], {}
    log.error("internal error in a REST handler", exc_info=exc)
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return 500, [
        "Internal server error.",
        f"<Exception on server side:\n{trace}\nEnd of exception on server side>",
    ], {}


def error_response(exc: BaseException) -> JSONResponse:
    """Flink's error body and status code for ``exc``."""
    status, errors, headers = _classify(exc)
    return JSONResponse(error_body(*errors), status_code=status, headers=headers or None)


async def handle_exception(_request: Any, exc: Exception) -> JSONResponse:
    """Exception handler for FastAPI (routing 404/405, validation, anything uncaught)."""
    return error_response(exc)
