"""REST errors: every failure becomes Flink's ``{"errors": ["..."]}`` with the right status code.

- ``RestHandlerException(status, message)``: raised by handlers for bad input (400, 401, 404, 413).
- Dispatcher errors (in-process, or as ``RemoteError`` over RPC): unknown job -> 404, duplicate
  submission -> 409, other submission errors -> 400; an unreachable or slow dispatcher -> 503.
- Routing: unknown path -> 404, wrong method -> 405; request validation -> 400 (Flink has no 422);
  a client that disconnects while its body is read -> 400 (not logged).
- Anything else is an internal error: 500 with Flink's "Internal server error." and a one-line
  summary (exception class and the first line of its message, at most 200 characters); the
  traceback never reaches the client. It is logged once per kind of error (class and raising
  line) with the request path; repeats of a kind are one line at most every 60 s with the number
  left out, so a client repeating a failing request cannot flood the log.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from flintlock.runtime.dispatcher.exceptions import (
    DuplicateJobSubmissionException,
    FlinkJobNotFoundException,
    JobSubmissionException,
)
from flintlock.runtime.rpc.exceptions import RecipientUnreachable, RemoteError, RpcTimeout

__all__ = ["RestHandlerException", "error_body", "error_response"]

log = logging.getLogger(__name__)

#: longest exception summary a 500 response carries (characters)
_SUMMARY_CHARS = 200

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


def _classify(exc: BaseException, path: str | None) -> tuple[int, list[str], dict[str, str]]:
    if isinstance(exc, RestHandlerException):
        return exc.status_code, [exc.message], exc.headers
    if isinstance(exc, RequestValidationError):
        return 400, _validation_messages(exc), {}
    if isinstance(exc, ClientDisconnect):  # nobody reads the answer: not an internal error
        return 400, ["Bad request: the client went away before sending the whole body."], {}
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
    _INTERNAL_ERRORS.report(exc, path)
    return 500, ["Internal server error.", _summary(exc)], {}


def _one_line(exc: BaseException) -> str:
    """``<Class>: <first line of the message>``, at most ``_SUMMARY_CHARS`` characters."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 3] + "..."


def _summary(exc: BaseException) -> str:
    """What a 500 response says of ``exc``: ``_one_line``, and where the traceback is."""
    return (f"<Exception on server side: {_one_line(exc)} (the traceback is in the JobManager "
            "log)>")


class _InternalErrorLog:
    """Logs unexpected handler errors without letting clients multiply log entries.

    The first error of a kind (its class and the file and line that raised it) is logged at
    ERROR with its traceback and the request path; later ones of that kind are one line (no
    traceback) at most every ``repeat_interval_s`` seconds, with the number left out since. At
    most ``max_kinds`` kinds are remembered; past that, errors of new kinds are one line each
    time, without a traceback.
    """

    def __init__(self, repeat_interval_s: float = 60.0, max_kinds: int = 1024,
                 clock: Any = time.monotonic) -> None:
        self._repeat_interval_s = repeat_interval_s
        self._max_kinds = max_kinds
        self._clock = clock
        self._lock = threading.Lock()
        #: kind -> [monotonic time of its last log line, errors left out since]
        self._kinds: dict[tuple[str, str, int], list[float]] = {}

    @staticmethod
    def _kind(exc: BaseException) -> tuple[str, str, int]:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        file, line = (tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None else ("?", 0)
        name = (exc.type_name if isinstance(exc, RemoteError)
                else f"{type(exc).__module__}.{type(exc).__qualname__}")
        return name, file, line

    def report(self, exc: BaseException, path: str | None) -> None:
        """Log ``exc`` (raised while answering ``path``) as described in the class docstring."""
        kind = self._kind(exc)
        now = self._clock()
        with self._lock:
            seen = self._kinds.get(kind)
            if seen is not None and now - seen[0] < self._repeat_interval_s:
                seen[1] += 1
                return
            first = seen is None and len(self._kinds) < self._max_kinds
            left_out = int(seen[1]) if seen is not None else 0
            if first or seen is not None:
                self._kinds[kind] = [now, 0]
        where = repr(path[:200]) if path is not None else "a REST request"
        if first:
            log.error("internal error answering %s", where, exc_info=exc)
        else:
            log.error("internal error answering %s: %s at %s:%d (%d more of this kind since its "
                      "last report; its traceback is logged once)", where, _one_line(exc),
                      kind[1], kind[2], left_out)


_INTERNAL_ERRORS = _InternalErrorLog()


def error_response(exc: BaseException, path: str | None = None) -> JSONResponse:
    """Flink's error body and status code for ``exc``, raised while answering ``path``.

    Unexpected errors (500) are logged as ``_InternalErrorLog`` describes, with ``path`` when
    given; their traceback is never part of the response.
    """
    status, errors, headers = _classify(exc, path)
    return JSONResponse(error_body(*errors), status_code=status, headers=headers or None)


async def handle_exception(request: Any, exc: Exception) -> JSONResponse:
    """Exception handler for FastAPI (routing 404/405, validation, anything uncaught).

    A 405's ``Allow`` header lists every method the path is served with (Starlette names only
    those of the first route whose path matched).
    """
    path = getattr(getattr(request, "url", None), "path", None)
    response = error_response(exc, path)
    if response.status_code == 405 and hasattr(request, "scope"):
        methods = _allowed_methods(request)
        if methods:
            response.headers["Allow"] = ", ".join(methods)
    return response


def _allowed_methods(request: Any) -> list[str]:
    from flintlock.runtime.rest.openapi import allowed_methods  # openapi imports handlers' modules

    return allowed_methods(request.app, request.url.path)
