"""TLS settings from Flink's security.ssl.* keys (PEM keystores and truststores)."""

from __future__ import annotations

import ssl

import pytest

from flintlock.config import Configuration
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.runtime.net.ssl_utils import (
    internal_pem_files,
    rest_client_ssl_context,
    rest_scheme,
    rest_server_settings,
)
from flintlock.testing.tls import make_ca


@pytest.fixture
def ca(tmp_path):
    return make_ca(tmp_path / "ca")


def test_without_tls_nothing_changes():
    conf = Configuration()
    assert rest_scheme(conf) == "http"
    assert rest_server_settings(conf) == {} and rest_client_ssl_context(conf) is None


def test_rest_server_and_client_settings(ca):
    server = ca.issue("jm", password="pw")
    conf = Configuration({"security.ssl.rest.enabled": "true",
                          "security.ssl.rest.keystore": str(server),
                          "security.ssl.rest.key-password": "pw",
                          "security.ssl.rest.truststore": str(ca.truststore)})
    assert rest_scheme(conf) == "https"
    assert rest_server_settings(conf) == {"ssl_certfile": str(server), "ssl_keyfile_password": "pw"}
    context = rest_client_ssl_context(conf)
    assert context is not None and context.check_hostname
    assert context.verify_mode is ssl.CERT_REQUIRED


def test_mutual_rest_tls_requires_client_certificates(ca):
    server = ca.issue("jm")
    conf = Configuration({"security.ssl.rest.enabled": "true",
                          "security.ssl.rest.authentication-enabled": "true",
                          "security.ssl.rest.keystore": str(server),
                          "security.ssl.rest.truststore": str(ca.truststore)})
    settings = rest_server_settings(conf)
    assert settings["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    assert settings["ssl_ca_certs"] == str(ca.truststore)


def test_errors_name_what_is_missing(ca, tmp_path):
    with pytest.raises(IllegalConfigurationException, match="no keystore is configured"):
        rest_server_settings(Configuration({"security.ssl.rest.enabled": "true"}))
    with pytest.raises(IllegalConfigurationException, match="cannot read the TLS keystore"):
        rest_server_settings(Configuration({"security.ssl.rest.enabled": "true",
                                            "security.ssl.rest.keystore": str(tmp_path / "no")}))
    only_cert = tmp_path / "cert-only.pem"
    only_cert.write_bytes(ca.truststore.read_bytes())
    with pytest.raises(IllegalConfigurationException, match="private key"):
        internal_pem_files(Configuration({
            "security.ssl.internal.keystore": str(only_cert)})).certificate_chain_and_key()
    encrypted = ca.issue("tm", password="right")
    with pytest.raises(IllegalConfigurationException, match="cannot decrypt"):
        internal_pem_files(Configuration({
            "security.ssl.internal.keystore": str(encrypted),
            "security.ssl.internal.key-password": "wrong"})).certificate_chain_and_key()


def test_decrypted_key_for_grpc(ca):
    encrypted = ca.issue("tm", password="right")
    chain, key = internal_pem_files(Configuration({
        "security.ssl.internal.keystore": str(encrypted),
        "security.ssl.internal.keystore-password": "right"})).certificate_chain_and_key()
    assert chain.startswith(b"-----BEGIN CERTIFICATE-----")
    assert key.startswith(b"-----BEGIN PRIVATE KEY-----")  # decrypted, as gRPC needs


def test_key_passwords_are_sensitive():
    conf = Configuration({"security.ssl.rest.key-password": "pw-1",
                          "security.ssl.internal.keystore-password": "pw-2"})
    assert "pw-1" not in repr(conf) and "pw-2" not in repr(conf)


def test_web_submission_clients_get_the_rest_tls_keys_but_no_password(ca):
    from flintlock.runtime.net.ssl_utils import rest_client_settings

    assert rest_client_settings(Configuration()) == {}
    server = ca.issue("jm", password="pw")
    conf = Configuration({"security.ssl.rest.enabled": "true",
                          "security.ssl.rest.keystore": str(server),
                          "security.ssl.rest.key-password": "pw",
                          "security.ssl.rest.truststore": str(ca.truststore)})
    settings = rest_client_settings(conf)
    assert settings == {"security.ssl.rest.enabled": "true",
                        "security.ssl.rest.truststore": str(ca.truststore),
                        "security.ssl.rest.authentication-enabled": "false",
                        "security.ssl.rest.keystore": str(server)}
    assert "pw" not in settings.values()
    # what the client process builds from them verifies the server
    assert rest_client_ssl_context(Configuration(settings)) is not None
