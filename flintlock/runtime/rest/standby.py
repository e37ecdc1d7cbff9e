"""The REST server of a standby JobManager (high availability): every request is redirected to
the leader's REST server with 307 (method and body kept), or answered 503 while no leader is
known, so a browser or client pointed at any JobManager reaches the leader (Flink's web UI
redirects from a standby the same way; ``LeaderRetrievalHandler``)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

__all__ = ["create_standby_app"]


def create_standby_app(leader_rest: Callable[[], str | None]) -> Starlette:
    """``leader_rest()``: the leader's REST base URL (``http://host:port``), None if unknown."""

    async def redirect(request: Request) -> Response:
        leader = leader_rest()
        if not leader:
            return JSONResponse({"errors": [
                "this JobManager stands by and no leader is known yet; retry shortly"]},
                status_code=503, headers={"Retry-After": "1"})
        target = leader.rstrip("/") + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        return RedirectResponse(target, status_code=307)

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route("/{path:path}", redirect, methods=methods)])
