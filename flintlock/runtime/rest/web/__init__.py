"""The web dashboard: static HTML, CSS and JavaScript served by the JobManager's REST server.

Follows Flink's ``flink-runtime-web`` (the dashboard Flink serves at ``/`` from its ``web/`` folder,
``WebContentHandlerSpecification``), without a build step: plain ES modules under ``static/``.
The pages only call the public REST API (relative, unversioned paths such as ``jobs/overview``,
as Flink's dashboard does), and re-read it every ``web.refresh-interval`` (``GET /config``).

Routes added to the app (no API path is shadowed):

- ``GET /`` and ``GET /index.html``: the single page (hash routing: ``#/jobs/<jobid>``, ...).
- ``GET /web/<file>``: the static assets (``/web/js/app.js``, ``/web/style.css``, ...).

Every response carries a restrictive Content-Security-Policy (scripts and styles from this origin
only, no inline script, no framing), ``X-Content-Type-Options: nosniff`` and ``Cache-Control:
no-cache`` (so a new version is picked up after an upgrade).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flintlock.config import Configuration

__all__ = ["SECURITY_HEADERS", "STATIC_DIR", "WEB_PREFIX", "mount_web_ui"]

#: Where the dashboard's files live inside the package.
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: URL prefix of the assets (Flink's REST paths never start with it).
WEB_PREFIX = "/web"

#: Headers of every dashboard response: scripts, styles and requests only from this origin (no
#: inline script or style: the pages set styles through the CSSOM), no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class _StaticWithHeaders:
    """ASGI wrapper adding the security and cache headers to every static response."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode("latin-1"), v.encode("latin-1"))
                            for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_headers)


def mount_web_ui(app: FastAPI, configuration: Configuration) -> None:
    """Serve the dashboard from ``app``: ``/`` (the page) and ``/web/...`` (its assets).

    Args:
        app: the REST app from ``create_app``; its API routes keep precedence (the page is one
            exact route, the assets live under ``/web``).
        configuration: the cluster configuration; the page reads what it needs (refresh interval,
            whether submission is enabled) from ``GET /config`` at run time.

    Raises:
        FileNotFoundError: the package was installed without its static files.
    """
    del configuration  # the page reads its settings through GET /config
    index = STATIC_DIR / "index.html"
    if not index.is_file():
        raise FileNotFoundError(
            f"web UI files missing: {index} (reinstall flintlock with its package data)")

    async def dashboard(request: Request) -> Response:
        del request
        return FileResponse(index, media_type="text/html; charset=utf-8",
                            headers=SECURITY_HEADERS)

    for path in ("/", "/index.html"):
        app.add_api_route(path, dashboard, methods=["GET"], include_in_schema=False)
    app.mount(WEB_PREFIX, _StaticWithHeaders(StaticFiles(directory=STATIC_DIR)), name="web")
