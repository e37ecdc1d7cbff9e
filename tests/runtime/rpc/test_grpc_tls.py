"""RPC over mutual TLS (``security.ssl.internal.*``): calls work between certified peers, and a
peer without a certificate of the cluster's CA cannot connect, even with the cluster secret."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_grpc_service import EchoGateway, run, two_services

from flintlock.config import Configuration
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.runtime.net.ssl_utils import PemFiles, internal_pem_files
from flintlock.runtime.rpc.exceptions import RecipientUnreachable
from flintlock.runtime.rpc.grpc_service import GrpcRpcService
from flintlock.testing.tls import make_ca

SECRET = "tls-secret"


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, PemFiles]:
    ca = make_ca(tmp_path / "ca")
    other = make_ca(tmp_path / "other", "another CA")
    return {
        "server": PemFiles(str(ca.issue("jm")), None, str(ca.truststore), True),
        "client": PemFiles(str(ca.issue("tm", password="pw")), "pw", str(ca.truststore), True),
        "stranger": PemFiles(str(other.issue("x")), None, str(other.truststore), True),
        "wrong-host": PemFiles(str(ca.issue("elsewhere", hosts=("10.9.9.9",))), None,
                               str(ca.truststore), True),
    }


async def _call(server_tls: PemFiles | None, client_tls: PemFiles | None) -> object:
    async with two_services({"tls": server_tls}, {"tls": client_tls, "timeout_s": 5.0}) as (
            _, client, echo):
        gateway = await client.connect(echo.address, EchoGateway, timeout_s=5.0)
        return await gateway.echo({"over": "tls"})


def test_calls_between_certified_peers(pki) -> None:
    async def body() -> None:
        assert await _call(pki["server"], pki["client"]) == {"over": "tls"}

    run(body)


@pytest.mark.parametrize("client", ["plain", "stranger"])
def test_a_peer_without_a_cluster_certificate_cannot_call(pki, client) -> None:
    async def body() -> None:
        # a plain client's handshake is cut by the server; a stranger's certificate is refused
        with pytest.raises(RecipientUnreachable, match="(?i)socket closed|handshake"):
            await _call(pki["server"], None if client == "plain" else pki[client])

    run(body)


def test_a_server_whose_certificate_names_another_host_is_refused(pki) -> None:
    async def body() -> None:
        with pytest.raises(RecipientUnreachable, match="Hostname Verification"):
            await _call(pki["wrong-host"], pki["client"])

    run(body)


def test_a_plain_server_is_not_reached_by_a_tls_client(pki) -> None:
    async def body() -> None:
        with pytest.raises(RecipientUnreachable, match="(?i)handshake"):
            await asyncio.wait_for(_call(None, pki["client"]), 30)

    run(body)


def test_configuration_errors_name_the_key(tmp_path, pki) -> None:
    conf = Configuration({"security.ssl.internal.enabled": "true",
                          "security.ssl.internal.truststore": pki["server"].truststore})
    with pytest.raises(IllegalConfigurationException, match="keystore"):
        GrpcRpcService(secret=SECRET, tls=internal_pem_files(conf))
    encrypted = Configuration({"security.ssl.internal.keystore": pki["client"].keystore,
                               "security.ssl.internal.truststore": pki["client"].truststore})
    with pytest.raises(IllegalConfigurationException, match="encrypted"):
        GrpcRpcService(secret=SECRET, tls=internal_pem_files(encrypted))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not pem")
    bad = Configuration({"security.ssl.internal.keystore": str(garbage),
                         "security.ssl.internal.truststore": str(garbage)})
    with pytest.raises(IllegalConfigurationException, match="no PEM blocks"):
        GrpcRpcService(secret=SECRET, tls=internal_pem_files(bad))
