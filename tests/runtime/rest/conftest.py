"""REST test harness: the app on a TestClient, backed by a testing DispatcherGateway.

The testing Dispatcher (a ``TestingEndpoint`` on an ``InProcRpcService``) and the app run in the
same event loop, as in the JobManager: the TestClient is given the blocking portal whose loop
started the endpoint, so handlers await the gateway in that loop.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
import pytest

from flintlock.config import Configuration
from flintlock.runtime.dispatcher.gateway import ClusterOverview, DispatcherGateway
from flintlock.runtime.resourcemanager.gateway import ResourceOverview
from flintlock.runtime.rest import create_app
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.testing.gateways import RecordedCall, TestingEndpoint

with warnings.catch_warnings():
    # starlette 1.x deprecates TestClient over httpx in favour of httpx2 (not installed).
    warnings.filterwarnings("ignore", message=".*httpx2.*")
    from starlette.testclient import TestClient

SECRET = "s3cret-token"
NOW_MS = 1_700_000_100_000


@dataclass
class RestHarness:
    """``client`` talks to the app; ``dispatcher`` records calls and takes handlers."""

    client: TestClient
    dispatcher: TestingEndpoint
    secret: str | None = SECRET
    now_ms: int = NOW_MS

    def on(self, method: str, handler: Callable[..., Any]) -> None:
        self.dispatcher.handlers[method] = handler

    def calls(self, method: str) -> list[RecordedCall]:
        return self.dispatcher.calls_to(method)


def _make_harness(conf: dict[str, Any] | None = None, secret: str | None = SECRET,
                  **app: Any) -> Iterator[RestHarness]:
    with anyio.from_thread.start_blocking_portal() as portal:
        endpoint = TestingEndpoint("dispatcher", DispatcherGateway)
        # an empty cluster unless a test says otherwise (GET /taskmanagers reads its pending ones)
        endpoint.handlers["request_cluster_overview"] = lambda: ClusterOverview(
            ResourceOverview(0, 0, 0), 0, 0, 0, 0)

        async def start() -> Any:
            rpc = InProcRpcService()
            rpc.register(endpoint)
            await endpoint.start()
            return await rpc.connect(endpoint.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_ID)

        gateway = portal.call(start)
        client = TestClient(create_app(gateway, Configuration(conf or {}), secret=secret,
                                       now_ms=lambda: NOW_MS, **app),
                            base_url="http://localhost")
        client.portal = portal  # run requests in the dispatcher's loop
        try:
            yield RestHarness(client, endpoint, secret)
        finally:
            client.portal = None
            portal.call(endpoint.stop)


@pytest.fixture
def rest() -> Iterator[RestHarness]:
    yield from _make_harness()


@pytest.fixture
def make_rest() -> Iterator[Callable[..., RestHarness]]:
    """Build a harness with another configuration or secret: ``make_rest(conf, secret=...)``;
    more keywords go to ``create_app``."""
    generators: list[Iterator[RestHarness]] = []

    def make(conf: dict[str, Any] | None = None, secret: str | None = SECRET,
             **app: Any) -> RestHarness:
        gen = _make_harness(conf, secret, **app)
        generators.append(gen)
        return next(gen)

    yield make
    for gen in generators:
        for _ in gen:
            pass
