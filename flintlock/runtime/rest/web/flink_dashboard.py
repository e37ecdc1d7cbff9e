"""Apache Flink's own web dashboard, served by the JobManager at ``/flink/`` (``web.flink-dashboard.path``).

Flink's dashboard (``flink-runtime-web``'s Angular app, shipped as the ``web/`` folder of the
flink-dist jar) calls the REST API relative to its own location (its ``BASE_URL`` is ``.``) and
routes by URL fragment (``#/overview``). So served at ``/flink/``, its requests arrive as
``/flink/jobs/overview``, ``/flink/config``...: the REST routes are served under ``/flink`` too, and
every other ``GET /flink/<file>`` is a file of the dashboard. Users open
``http://<rest.address>:<rest.port>/flink/`` next to flintlock's own dashboard at ``/``.

``web.flink-dashboard.path`` names what to serve (checked when the REST server starts):

- a flink-dist jar (``flink-dist-<version>.jar``, e.g. from ``pip download apache-flink-libraries``):
  the files under its ``web/`` folder, read from the jar on request (16 MB, ~180 files);
- a FLINK_HOME: its ``lib/flink-dist-*.jar``;
- a directory holding the dashboard's ``index.html`` (an unpacked ``web/`` folder).

The dashboard is third-party code with inline styles and Web Workers, so its files do not carry
the restrictive Content-Security-Policy of flintlock's pages; they carry ``frame-ancestors 'none'``
(no framing), ``base-uri 'self'``, ``form-action 'self'`` and ``X-Content-Type-Options: nosniff``.
The REST calls it makes are the same calls with the same checks (Host, bearer secret) as anywhere.
"""

from __future__ import annotations

import mimetypes
import threading
import zipfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from flintlock.config import Configuration
from flintlock.config.options import WEB_FLINK_DASHBOARD
from flintlock.runtime.rest.errors import error_body

__all__ = ["FLINK_DASHBOARD_PREFIX", "DashboardFiles", "mount_flink_dashboard", "open_dashboard"]

#: Where the JobManager serves Flink's dashboard (no Flink REST path starts with it).
FLINK_DASHBOARD_PREFIX = "/flink"

_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'none'; base-uri 'self'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

_MEDIA_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
                ".html": "text/html; charset=utf-8", ".json": "application/json",
                ".svg": "image/svg+xml", ".ttf": "font/ttf", ".woff": "font/woff",
                ".woff2": "font/woff2", ".txt": "text/plain; charset=utf-8"}


class DashboardFiles:
    """The dashboard's files by relative name (``index.html``, ``assets/favicon/favicon.ico``).

    Reads from a jar's ``web/`` folder or from a directory; thread-safe (one ``ZipFile`` behind a
    lock). ``read`` returns None for a name that is not a file of the dashboard, including any
    name that would leave its folder (``..``, absolute paths)."""

    def __init__(self, source: Path, names: dict[str, str], jar: zipfile.ZipFile | None) -> None:
        self.source = source
        self._names = names
        self._jar = jar
        self._lock = threading.Lock()

    def read(self, name: str) -> bytes | None:
        entry = self._names.get(name)
        if entry is None:
            return None
        if self._jar is None:
            return Path(entry).read_bytes()
        with self._lock:
            return self._jar.read(entry)


def open_dashboard(path: str) -> DashboardFiles:
    """The dashboard files ``web.flink-dashboard.path`` names (see the module docstring).

    Raises:
        ValueError: ``path`` does not exist, or holds no Flink dashboard (message says what was
            looked for and what to pass instead).
    """
    source = Path(path).expanduser()
    if source.is_dir():
        for folder in (source, source / "web"):
            if (folder / "index.html").is_file():
                return _from_directory(folder)
        jars = sorted((source / "lib").glob("flink-dist*.jar"))
        if not jars:
            raise ValueError(
                f"web.flink-dashboard.path: {source} holds neither index.html, web/index.html nor "
                "lib/flink-dist-*.jar; pass a FLINK_HOME, a flink-dist jar or Flink's web/ folder")
        source = jars[-1]
    if not source.is_file():
        raise ValueError(f"web.flink-dashboard.path: {source} does not exist; pass a FLINK_HOME, "
                         "a flink-dist jar or Flink's web/ folder")
    try:
        jar = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ValueError(f"web.flink-dashboard.path: {source} is not a jar ({exc}); pass a "
                         "FLINK_HOME, a flink-dist jar or Flink's web/ folder") from exc
    names = {n[len("web/"):]: n for n in jar.namelist()
             if n.startswith("web/") and not n.endswith("/")}
    if "index.html" not in names:
        jar.close()
        raise ValueError(f"web.flink-dashboard.path: {source} has no web/index.html (is it the "
                         "flink-dist jar?)")
    return DashboardFiles(source, names, jar)


def _from_directory(folder: Path) -> DashboardFiles:
    root = folder.resolve()
    names = {p.relative_to(root).as_posix(): str(p) for p in root.rglob("*")
             if p.is_file() and p.resolve().is_relative_to(root)}
    return DashboardFiles(root, names, None)


def _media_type(name: str) -> str:
    suffix = PurePosixPath(name).suffix.lower()
    return _MEDIA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def mount_flink_dashboard(app: FastAPI, configuration: Configuration,
                          routers: Iterable[APIRouter]) -> DashboardFiles | None:
    """Serve Flink's dashboard at ``/flink/`` when ``web.flink-dashboard.path`` is set.

    Args:
        app: the REST app; call after its own routes are added.
        configuration: the cluster configuration.
        routers: the REST API's routers, served again under ``/flink`` (left out of the OpenAPI
            document).

    Returns:
        The files served, or None when the option is unset.

    Raises:
        ValueError: the option names no Flink dashboard (``open_dashboard``).
    """
    path = configuration.get(WEB_FLINK_DASHBOARD)
    if not path:
        return None
    files = open_dashboard(path)
    for router in routers:
        app.include_router(router, prefix=FLINK_DASHBOARD_PREFIX, include_in_schema=False)

    async def to_dashboard(request: Request) -> Response:
        del request
        return RedirectResponse(FLINK_DASHBOARD_PREFIX + "/", status_code=307)

    async def dashboard_file(request: Request) -> Response:
        name = request.path_params.get("name") or "index.html"
        data = await run_in_threadpool(files.read, name)
        if data is None:
            return JSONResponse(error_body(f"Not found: {request.url.path} (neither a REST path "
                                           "nor a file of Flink's dashboard)"), status_code=404)
        return Response(data, media_type=_media_type(name), headers=_HEADERS)

    app.add_api_route(FLINK_DASHBOARD_PREFIX, to_dashboard, methods=["GET"],
                      include_in_schema=False)
    app.add_api_route(FLINK_DASHBOARD_PREFIX + "/{name:path}", dashboard_file, methods=["GET"],
                      include_in_schema=False)
    return files
