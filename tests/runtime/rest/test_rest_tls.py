"""REST over TLS (``security.ssl.rest.*``): https with the configured certificate, verified by
the CLI's RestClusterClient against the truststore; plain http and untrusted clients fail."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from flintlock.client.rest_cluster_client import RestClusterClient
from flintlock.config import Configuration
from flintlock.runtime.dispatcher.gateway import ClusterOverview, DispatcherGateway
from flintlock.runtime.net.ssl_utils import rest_client_ssl_context
from flintlock.runtime.resourcemanager.gateway import ResourceOverview
from flintlock.runtime.rest import RestServer, create_app
from flintlock.runtime.rest.server import server_options
from flintlock.runtime.rpc.endpoint import DEFAULT_LEADER_ID
from flintlock.runtime.rpc.service import InProcRpcService
from flintlock.testing.gateways import TestingEndpoint
from flintlock.testing.tls import make_ca


def _tls_conf(tmp_path: Path, mutual: bool = False) -> tuple[Configuration, Any]:
    ca = make_ca(tmp_path / "ca")
    conf = {"security.ssl.rest.enabled": "true",
            "security.ssl.rest.keystore": str(ca.issue("jm", password="pw")),
            "security.ssl.rest.key-password": "pw",
            "security.ssl.rest.truststore": str(ca.truststore)}
    if mutual:
        conf["security.ssl.rest.authentication-enabled"] = "true"
    return Configuration(conf), ca


async def _serve(conf: Configuration, body: Any) -> None:
    rpc = InProcRpcService()
    dispatcher = TestingEndpoint(
        "dispatcher", DispatcherGateway,
        request_cluster_overview=lambda: ClusterOverview(ResourceOverview(1, 2, 2), 0, 0, 0, 0))
    rpc.register(dispatcher)
    await dispatcher.start()
    gateway = await rpc.connect(dispatcher.address, DispatcherGateway,
                                fencing_token=DEFAULT_LEADER_ID)
    server = RestServer(create_app(gateway, conf, secret="x"), port=0, **server_options(conf))
    await server.start()
    try:
        await body(server)
    finally:
        await server.stop()
        await dispatcher.stop()


def test_https_with_the_cli_client(tmp_path):
    conf, _ = _tls_conf(tmp_path)

    async def body(server: RestServer) -> None:
        assert server.url.startswith("https://127.0.0.1:")

        def cli() -> dict[str, Any]:
            with RestClusterClient("127.0.0.1", server.port, "x",
                                   ssl_context=rest_client_ssl_context(conf)) as client:
                assert client.base_url.startswith("https://")
                return client.overview()

        assert (await asyncio.to_thread(cli))["taskmanagers"] == 1
        # the web UI is served over the same https origin
        async with httpx.AsyncClient(base_url=server.url,
                                     verify=rest_client_ssl_context(conf)) as client:
            page = await client.get("/")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        # plain http to the TLS port gets no answer; a client that does not trust the CA fails
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            with pytest.raises(httpx.HTTPError):
                await client.get("/overview")
        async with httpx.AsyncClient(base_url=server.url) as client:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get("/overview")

    asyncio.run(_serve(conf, body))


def test_mutual_tls_requires_a_client_certificate(tmp_path):
    conf, ca = _tls_conf(tmp_path, mutual=True)

    async def body(server: RestServer) -> None:
        without = ssl.create_default_context(cafile=str(ca.truststore))
        async with httpx.AsyncClient(base_url=server.url, verify=without) as client:
            with pytest.raises(httpx.HTTPError):
                await client.get("/overview")
        async with httpx.AsyncClient(base_url=server.url,
                                     verify=rest_client_ssl_context(conf)) as client:
            assert (await client.get("/overview")).status_code == 200

    asyncio.run(_serve(conf, body))
