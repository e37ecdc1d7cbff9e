"""``create_app``: Flink's REST API v1 as a FastAPI app in front of a DispatcherGateway.

Every route is served under ``/v1/<path>`` (what Flink's Java ``RestClient`` calls, and what the
OpenAPI document at ``/openapi.json`` lists) and under ``/<path>`` (what the web dashboard calls).
Handlers only await the ``DispatcherGateway``; run the app in the JobManager's event loop
(``RestServer``) so those awaits reach the Dispatcher's mailbox directly. Errors are always
Flink's ``{"errors": [...]}`` (``flintlock.runtime.rest.errors``). Flintlock's dashboard is served at
``/``; Apache Flink's own, when ``web.flink-dashboard.path`` is set, at ``/flink/`` (with the API
under ``/flink/<path>`` as well: ``rest.web.flink_dashboard``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from flintlock.config import Configuration
from flintlock.config.options import (
    METRIC_FETCHER_UPDATE_INTERVAL,
    REST_SERVER_MAX_CONTENT,
    WEB_UPLOAD_DIR,
)
from flintlock.runtime.dispatcher.gateway import DispatcherGateway
from flintlock.runtime.logs.files import LogDirectory
from flintlock.runtime.rest.errors import handle_exception
from flintlock.runtime.rest.handlers import (
    checkpoints,
    cluster,
    jars,
    jobmanager,
    jobs,
    metrics,
    savepoints,
    streaming,
    submit,
    taskmanagers,
    vertices,
)
from flintlock.runtime.rest.head import HeadAsGetMiddleware
from flintlock.runtime.rest.jar_store import JarStore
from flintlock.runtime.rest.metric_fetcher import TaskManagerMetricFetcher
from flintlock.runtime.rest.observability import ObservabilityContext
from flintlock.runtime.rest.openapi import install as install_openapi
from flintlock.runtime.rest.routing import RestContext, wall_clock_ms
from flintlock.runtime.rest.security import HostCheckMiddleware, allowed_host_names
from flintlock.runtime.rest.web import mount_web_ui
from flintlock.runtime.rest.web.flink_dashboard import mount_flink_dashboard

__all__ = ["API_VERSION_PREFIX", "create_app"]

#: Prefix of the versioned routes (Flink ``RuntimeRestAPIVersion.V1``).
API_VERSION_PREFIX = "/v1"


def create_app(
    dispatcher: DispatcherGateway,
    configuration: Configuration,
    *,
    secret: str | None,
    flink_version: str = "2.1-flintlock",
    flink_revision: str = "unknown",
    now_ms: Callable[[], int] | None = None,
    job_manager_logs: LogDirectory | None = None,
    high_availability: Callable[[], dict[str, Any]] | None = None,
) -> FastAPI:
    """Build the REST app.

    Args:
        dispatcher: the gateway every handler calls.
        configuration: cluster configuration (``web.*``, ``rest.server.max-content-length``).
            Raises ValueError when ``web.flink-dashboard.path`` names no Flink dashboard.
        secret: ``security.cluster.secret``; ``POST /jobs``, web submission, savepoints, stop and
            ``DELETE /cluster`` require it as a bearer token (``rest.security``). ``None``
            disables them (answered 401). Requests whose ``Host`` header names another site are
            answered 400 (``rest.server.allowed-hosts``).
        flink_version: reported by ``/config`` and ``/overview``.
        flink_revision: reported as ``flink-revision`` and ``flink-commit``.
        now_ms: wall clock in epoch ms (tests pass a fixed one).
        job_manager_logs: the JobManager process's log files (``/jobmanager/log[s]``).
        high_availability: reads the cluster's HA view for ``/jobmanager/high-availability``
            (blocking; run in a worker thread); None without high availability.

    Returns:
        The FastAPI app (serve it with ``RestServer``).
    """
    app = FastAPI(
        title="Flink JobManager REST API (flintlock)",
        version="v1/" + flink_version,
        description="Apache Flink's REST API v1, served by flintlock's JobManager. Paths are "
                    "served with and without the /v1 prefix.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.rest = RestContext(
        dispatcher=dispatcher,
        configuration=configuration,
        secret=secret,
        flink_version=flink_version,
        flink_revision=flink_revision,
        max_content_length=int(configuration.get(REST_SERVER_MAX_CONTENT)),
        metric_fetcher=TaskManagerMetricFetcher(
            lambda resource_id: dispatcher.request_task_manager_metrics(resource_id),
            configuration.get(METRIC_FETCHER_UPDATE_INTERVAL)),
        now_ms=now_ms or wall_clock_ms,
        high_availability=high_availability,
    )
    app.state.observability = ObservabilityContext(
        job_manager_logs=job_manager_logs,
        jars=JarStore(configuration.get(WEB_UPLOAD_DIR)),
    )
    # metrics first: its /jobs/metrics and /taskmanagers/metrics come before /jobs/{jobid} and
    # /taskmanagers/{taskmanagerid}
    routers = (metrics.router, cluster.router, jobs.router, submit.router, vertices.router,
               streaming.router, checkpoints.router, savepoints.router, taskmanagers.router,
               jobmanager.router, jars.router)
    for router in routers:
        app.include_router(router, prefix=API_VERSION_PREFIX)
        app.include_router(router, include_in_schema=False)
    mount_web_ui(app, configuration)
    mount_flink_dashboard(app, configuration, routers)
    install_openapi(app)
    app.add_middleware(HeadAsGetMiddleware)
    app.add_middleware(HostCheckMiddleware, allowed=allowed_host_names(configuration))
    app.add_exception_handler(StarletteHTTPException, handle_exception)
    app.add_exception_handler(RequestValidationError, handle_exception)
    app.add_exception_handler(Exception, handle_exception)
    return app
