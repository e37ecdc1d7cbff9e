"""RestServer: uvicorn in the current event loop on port 0, called over real HTTP with httpx."""

from __future__ import annotations

import asyncio
import signal

import httpx
import pytest

from flintlock.config import Configuration
from flintlock.runtime.dispatcher.gateway import ClusterOverview, DispatcherGateway
from flintlock.runtime.ids import JobID
from flintlock.runtime.resourcemanager.gateway import ResourceOverview
from flintlock.runtime.rest import RestServer, create_app
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.testing.gateways import TestingEndpoint


async def _serve_and_call() -> None:
    rpc = InProcRpcService()
    dispatcher = TestingEndpoint(
        "dispatcher", DispatcherGateway,
        request_cluster_overview=lambda: ClusterOverview(ResourceOverview(1, 2, 2), 0, 0, 0, 0),
    )
    rpc.register(dispatcher)
    await dispatcher.start()
    gateway = await rpc.connect(dispatcher.address, DispatcherGateway, fencing_token=DEFAULT_LEADER_ID)
    sigint_before = signal.getsignal(signal.SIGINT)
    server = RestServer(create_app(gateway, Configuration(), secret="x"), port=0)
    await server.start()
    try:
        assert server.port > 0
        assert signal.getsignal(signal.SIGINT) is sigint_before  # uvicorn left signals alone
        job = JobID.generate()
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            overview = (await client.get("/v1/overview")).json()
            assert overview["taskmanagers"] == 1 and overview["slots-total"] == 2
            r = await client.patch(f"/jobs/{job}", params={"mode": "cancel"})
            assert r.status_code == 202
            r = await client.get("/v1/nothing")
            assert r.status_code == 404 and r.json() == {"errors": ["Not Found"]}
        assert dispatcher.calls_to("cancel_job")[0].args == (job,)

        # A second server cannot bind the same port: start() raises at once.
        with pytest.raises(OSError):
            await RestServer(create_app(gateway, Configuration(), secret=None),
                             port=server.port).start()
    finally:
        await server.stop()
        await dispatcher.stop()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            await client.get("/v1/overview")
    await server.stop()  # idempotent


def test_rest_server_serves_in_the_current_loop_on_an_ephemeral_port():
    asyncio.run(_serve_and_call())


def test_port_before_start_is_an_error():
    server = RestServer(create_app(None, Configuration(), secret=None), port=0)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port
