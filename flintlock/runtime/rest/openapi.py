"""The OpenAPI document (``/openapi.json``) lists the answers the REST API really gives.

FastAPI documents each route's success answer and a 422 validation error. flintlock answers as
Flink does: every error is ``{"errors": ["..."]}`` (``ErrorResponseBody``), validation errors are
400 (Flink has no 422), and which codes an operation can return depends on what it does:

- every operation: 400 (bad parameters, or a ``Host`` this server is not, see ``rest.security``),
  404 (unknown job, vertex, TaskManager, file, ...), 503 (the Dispatcher is unreachable);
- operations that need the cluster secret (``SECURED`` in their route's ``openapi_extra``): the
  ``clusterSecret`` bearer security scheme and 401; web submission's also 403 (disabled);
- operations with a request body: 413 (``rest.server.max-content-length``); ``POST /jobs`` 409
  (the job id is taken);
- log files (``LOG_FILE`` in ``openapi_extra``): the ``Range`` header, 206 Partial Content with
  its ``Content-Range`` and flintlock's ``X-Log-*`` headers, and 416.

``install(app)`` makes ``app.openapi()`` produce that document, so schema-based fuzzing
(schemathesis, ``tests/runtime/rest/test_rest_fuzz.py``) checks every answer against it.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from flintlock.runtime.logs import files as log_files
from flintlock.runtime.rest import jar_store, observability

__all__ = ["ERROR_BODY", "LOG_FILE", "SECURED", "allowed_methods", "install"]

#: Flink's error body: ``{"errors": ["..."]}``.
ERROR_BODY: dict[str, Any] = {
    "type": "object", "required": ["errors"],
    "properties": {"errors": {"type": "array", "items": {"type": "string"}}},
}
_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponseBody"}

#: ``openapi_extra`` of a route that needs ``Authorization: Bearer <security.cluster.secret>``.
SECURED: dict[str, Any] = {"security": [{"clusterSecret": []}]}

_LOG_HEADERS = {
    name: {"description": text, "schema": {"type": "string"}} for name, text in (
        ("X-Log-Size", "size of the whole file in bytes"),
        ("X-Log-Start", "offset of the first byte sent"),
        ("X-Log-End", "offset after the last byte sent"),
    )
}

#: ``openapi_extra`` of a route that serves a log file (whole, paged or by ``Range``).
LOG_FILE: dict[str, Any] = {
    "parameters": [{
        "name": "Range", "in": "header", "required": False,
        "description": "bytes=<first>-<last>, bytes=<first>- or bytes=-<suffix length> (one "
                       "range)",
        "schema": {"type": "string", "pattern": r"^\s*bytes\s*=\s*\d*\s*-\s*\d*\s*$"},
    }],
    "responses": {
        "200": {"description": "The file (or the page asked for).", "headers": _LOG_HEADERS,
                "content": {"text/plain": {"schema": {"type": "string"}}}},
        "206": {"description": "The range asked for.",
                "headers": {**_LOG_HEADERS, "Content-Range": {
                    "description": "bytes <first>-<last>/<size>", "schema": {"type": "string"}}},
                "content": {"text/plain": {"schema": {"type": "string"}}}},
        "416": {"description": "The range starts past the end of the file (no body).",
                "headers": {"Content-Range": {"description": "bytes */<size>",
                                              "schema": {"type": "string"}}}},
    },
}

_HEX_ID = {"type": "string", "pattern": "^[0-9a-f]{32}$"}


def _ids(item: str) -> str:
    """A comma-separated list of ``item`` (blanks and empty entries allowed around commas)."""
    return f"^[ \t,]*({item}([ \t]*,[ \t,]*{item})*)?[ \t,]*$"

_RANGE = "[ \t]*[0-9]{1,9}[ \t]*(-[ \t]*[0-9]{1,9}[ \t]*)?"  # one subtask range


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" for c in word)


_AGG = f"[ \t]*({'|'.join(_any_case(a) for a in ('min', 'max', 'sum', 'avg', 'skew'))})[ \t]*"

#: What the handlers accept, per parameter: ids and names with the patterns they are parsed with.
_PARAMETERS: dict[tuple[str, str], dict[str, Any]] = {
    ("path", "jobid"): _HEX_ID,
    ("path", "vertexid"): _HEX_ID,
    ("path", "triggerid"): _HEX_ID,
    ("path", "operatorid"): _HEX_ID,
    ("path", "checkpointid"): {"type": "string", "pattern": "^[0-9]{1,18}$"},
    ("path", "subtaskindex"): {"type": "integer", "minimum": 0},
    ("path", "attempt"): {"type": "integer", "minimum": 0},
    ("path", "taskmanagerid"): {"type": "string", "pattern": observability.TM_ID.pattern},
    ("path", "jarid"): {"type": "string", "pattern": jar_store._ID.pattern},
    ("path", "filename"): {"type": "string", "pattern": log_files._NAME.pattern},
    ("query", "get"): {"type": "string",
                       "pattern": r"^[ \t,]*([A-Za-z0-9_.:-]+([ \t,]+[A-Za-z0-9_.:-]+)*)?[ \t,]*$"},
    ("query", "subtasks"): {"type": "string", "pattern": f"^[ \t]*$|^{_RANGE}(,{_RANGE})*$"},
    ("query", "agg"): {"type": "string", "pattern": f"^[ \t]*$|^{_AGG}(,{_AGG})*$"},
    ("query", "mode"): {"type": "string", "enum": ["cancel"]},
    ("query", "count"): {"type": "integer", "minimum": 0, "maximum": 1 << 20},
    ("query", "length"): {"type": "integer", "minimum": 0, "maximum": 1 << 20},
    ("query", "parallelism"): {"type": "integer", "minimum": 1, "maximum": 32768},
    ("query", "jobs"): {"type": "string", "pattern": _ids("[0-9a-fA-F]{32}")},
    ("query", "taskmanagers"): {"type": "string",
                                "pattern": _ids(observability.TM_ID.pattern[1:-1])},
}

_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options"})

_COMMON = {
    "400": "Bad request: a malformed parameter or body, or a Host header that names another "
           "server (rest.server.allowed-hosts).",
    "404": "Not found: no such job, vertex, TaskManager, file or operation.",
    "503": "The Dispatcher is unreachable or did not answer in time.",
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def _document(operation: dict[str, Any], path: str, method: str) -> None:
    for parameter in operation.get("parameters", ()):
        constraint = _PARAMETERS.get((parameter.get("in"), parameter.get("name")))
        if constraint is not None:
            schema = parameter.setdefault("schema", {})
            title = schema.get("title")
            schema.clear()
            schema.update(constraint, **({"title": title} if title else {}))
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    errors = dict(_COMMON)
    if operation.get("security"):
        errors["401"] = ("The request lacks 'Authorization: Bearer <security.cluster.secret>' "
                         "(WWW-Authenticate names the scheme).")
        if "/jars" in path:
            errors["403"] = "Web submission is disabled (web.submit.enable: false)."
    if "requestBody" in operation or method in ("post", "put", "patch"):
        errors["413"] = "The body exceeds rest.server.max-content-length."
    if method == "post" and path.rstrip("/").endswith("/jobs"):
        errors["409"] = "A job with this id was already submitted."
    for code, description in errors.items():
        responses.setdefault(code, _error(description))


def install(app: FastAPI) -> None:
    """Make ``app.openapi()`` (``/openapi.json``) document every answer (see the module doc)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(title=app.title, version=app.version,
                                   description=app.description, routes=app.routes)
            components = document.setdefault("components", {})
            schemas = components.setdefault("schemas", {})
            schemas["ErrorResponseBody"] = ERROR_BODY
            for unused in ("HTTPValidationError", "ValidationError"):
                schemas.pop(unused, None)
            components["securitySchemes"] = {"clusterSecret": {
                "type": "http", "scheme": "bearer",
                "description": "security.cluster.secret (for `flintlock cluster start`, the "
                               "file 'secret' in its state directory)."}}
            for path, item in document.get("paths", {}).items():
                for method, operation in item.items():
                    if isinstance(operation, dict) and "responses" in operation:
                        _document(operation, path, method)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """The methods the document lists for ``path`` (with or without ``/v1``), plus HEAD where GET
    is served (``HeadAsGetMiddleware``): the ``Allow`` header of a 405.

    Where a literal path and a template both match (``/jobs/overview``, ``/jobs/{jobid}``), the
    path with the fewest parameters names the resource.
    """
    templates: list[tuple[re.Pattern[str], int, set[str]]] | None = getattr(
        app.state, "allowed_methods", None)
    if templates is None:
        templates = []
        for template, item in app.openapi().get("paths", {}).items():
            regex = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
            templates.append((re.compile(f"^{regex}/?$"), template.count("{"),
                              {m.upper() for m in item if m in _HTTP_METHODS}))
        app.state.allowed_methods = templates
    versioned = path if path.startswith("/v1/") else "/v1" + path
    matching = [(params, listed) for pattern, params, listed in templates
                if pattern.match(versioned)]
    fewest = min((params for params, _ in matching), default=0)
    methods: set[str] = set()
    for params, listed in matching:
        if params == fewest:
            methods |= listed
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)
