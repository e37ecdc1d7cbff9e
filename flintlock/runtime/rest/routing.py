"""What every handler shares: the ``RestContext``, the error-mapping route class, id parsing,
bounded request bodies."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.routing import APIRoute
from starlette.responses import Response

from flintlock.config import Configuration
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.ids import HexID, ResourceID
from flintlock.runtime.metrics.task_manager_metrics import TaskManagerMetricsSnapshot
from flintlock.runtime.rest.errors import RestHandlerException, error_response
from flintlock.runtime.rest.metric_fetcher import TaskManagerMetricFetcher

__all__ = ["Ctx", "FlinkRoute", "RestContext", "check_declared_length", "new_router", "parse_id",
           "read_body", "rest_context", "too_large", "wall_clock_ms"]

_H = TypeVar("_H", bound=HexID)


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class RestContext:
    """The dispatcher and settings the handlers of one app use (``app.state.rest``).

    Attributes:
        dispatcher: the only thing handlers call.
        configuration: the cluster configuration.
        secret: ``security.cluster.secret``; ``None`` disables job submission.
        flink_version: reported by ``/config`` and ``/overview``.
        flink_revision: reported as ``flink-revision`` / ``flink-commit``.
        max_content_length: ``rest.server.max-content-length`` in bytes.
        now_ms: wall clock in epoch ms (for durations of running jobs).
        high_availability: reads the HA view (``HighAvailabilityServices.describe``, blocking);
            None without high availability.
        metric_fetcher: serves TaskManager metrics (``metrics.fetcher.update-interval``).
    """

    dispatcher: DispatcherGateway
    configuration: Configuration
    secret: str | None
    flink_version: str
    flink_revision: str
    max_content_length: int
    metric_fetcher: TaskManagerMetricFetcher
    now_ms: Callable[[], int] = field(default=wall_clock_ms)
    high_availability: Callable[[], dict[str, Any]] | None = None

    async def task_manager_metrics(self, resource_id: ResourceID) -> TaskManagerMetricsSnapshot:
        """The TaskManager's metrics, at most one update interval old (``metric_fetcher``).
        Raises what the Dispatcher's request raises."""
        snapshot: TaskManagerMetricsSnapshot = await self.metric_fetcher.get(resource_id)
        return snapshot


async def rest_context(request: Request) -> RestContext:
    """FastAPI dependency: the app's ``RestContext`` (async: FastAPI runs a sync dependency in its
    thread pool, a thread hand-off per request)."""
    ctx: RestContext = request.app.state.rest
    return ctx


#: Handler parameter type that injects the app's ``RestContext``.
Ctx = Annotated[RestContext, Depends(rest_context)]


class FlinkRoute(APIRoute):
    """An ``APIRoute`` whose errors, of any kind, become Flink's ``{"errors": [...]}`` body.

    Catching here (rather than in a catch-all exception handler) answers the client without
    Starlette's ServerErrorMiddleware re-raising the error into the server.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def flink_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return error_response(exc, request.url.path)

        return flink_handler


def new_router() -> APIRouter:
    return APIRouter(route_class=FlinkRoute)


def parse_id(id_type: type[_H], parameter: str, text: str) -> _H:
    """Parse a 32-hex path parameter; 400 naming ``parameter`` when malformed."""
    try:
        return id_type.from_hex(text)
    except ValueError as exc:
        raise RestHandlerException(
            400, f"Bad request, could not parse path parameter {parameter}: {exc}"
        ) from None


def too_large(limit: int, what: str = "The request body") -> RestHandlerException:
    """413 naming ``rest.server.max-content-length`` (``limit`` bytes)."""
    return RestHandlerException(
        413, f"{what} exceeds rest.server.max-content-length ({limit} bytes).")


def check_declared_length(request: Request, limit: int, what: str = "The request body") -> None:
    """413 when the ``Content-Length`` header already says more than ``limit`` bytes, before any
    byte of the body is read; 400 when the header is not a number. Compared on its digits: an
    ``int()`` of thousands of digits would raise."""
    declared = request.headers.get("content-length")
    if declared is None:
        return
    digits = declared.strip()
    if not (digits.isascii() and digits.isdigit()):
        raise RestHandlerException(400, f"Bad request, invalid Content-Length {declared[:40]!r}.")
    digits = digits.lstrip("0") or "0"
    if len(digits) > len(str(limit)) or int(digits) > limit:
        raise too_large(limit, what)


async def read_body(request: Request, limit: int, what: str = "The request body") -> bytes:
    """The whole body, at most ``limit`` bytes (413 as soon as more arrives).

    Raises:
        RestHandlerException: 413 past ``limit``; 400 for a malformed ``Content-Length``.
    """
    check_declared_length(request, limit, what)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit, what)
        chunks.append(chunk)
    return b"".join(chunks)
