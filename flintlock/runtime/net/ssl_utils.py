"""TLS settings of the REST endpoint and of the RPC (gRPC) connections, from Flink's keys.

Follows Flink's ``org.apache.flink.runtime.net.SSLUtils`` and ``SecurityOptions``, with PEM files
where Flink reads Java keystores:

- ``security.ssl.rest.enabled``: the REST server (and the web UI) speaks https with the
  certificate chain and private key of ``security.ssl.rest.keystore`` (one PEM file, chain and
  key; ``security.ssl.rest.key-password`` when the key is encrypted). Clients (CLI,
  ``RestClusterClient``) verify the server against ``security.ssl.rest.truststore`` (a PEM CA
  bundle; unset: the system's CAs). ``security.ssl.rest.authentication-enabled`` makes it mutual:
  the server requires a client certificate chaining to the truststore, and clients present the
  keystore's.
- ``security.ssl.internal.enabled``: every RPC connection between JobManagers and TaskManagers is
  mutual TLS: each process presents ``security.ssl.internal.keystore`` and accepts only peers
  whose certificates chain to ``security.ssl.internal.truststore`` (Flink's internal SSL is
  always mutual). Certificates must name the hosts that processes connect to (subject
  alternative names for the IP addresses or DNS names in ``taskmanager.host`` /
  ``jobmanager.rpc.address``).

TLS adds confidentiality and peer authentication by certificate; the cluster secret stays
required on top (RPC call tokens and payload tags, REST bearer tokens).

Errors: ``IllegalConfigurationException`` naming the key when a required file is unset,
unreadable, or not valid PEM.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flintlock.config import Configuration
from flintlock.config.configuration import IllegalConfigurationException
from flintlock.config.options import (
    SSL_INTERNAL_ENABLED,
    SSL_INTERNAL_KEY_PASSWORD,
    SSL_INTERNAL_KEYSTORE,
    SSL_INTERNAL_TRUSTSTORE,
    SSL_REST_AUTHENTICATION,
    SSL_REST_ENABLED,
    SSL_REST_KEY_PASSWORD,
    SSL_REST_KEYSTORE,
    SSL_REST_TRUSTSTORE,
)

__all__ = [
    "PemFiles",
    "internal_pem_files",
    "is_internal_ssl_enabled",
    "is_rest_ssl_enabled",
    "rest_client_ssl_context",
    "rest_pem_files",
    "rest_client_settings",
    "rest_scheme",
    "rest_server_settings",
]

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.+?-----END \1-----\r?\n?", re.S)


@dataclass(frozen=True)
class PemFiles:
    """The PEM material of one TLS scope (``rest`` or ``internal``).

    Attributes:
        keystore: path of the PEM file with the certificate chain and the private key (None when
            unset, allowed only for REST clients without mutual authentication).
        key_password: password of an encrypted private key.
        truststore: path of the PEM CA bundle (None: the system's CAs, REST clients only).
        mutual: whether the peer must present a certificate too.
    """

    keystore: str | None
    key_password: str | None
    truststore: str | None
    mutual: bool

    def certificate_chain_and_key(self) -> tuple[bytes, bytes]:
        """``(certificate chain PEM, unencrypted private key PEM)`` of the keystore (for gRPC,
        which takes bytes and no password; an encrypted key is decrypted with ``cryptography``).

        Raises:
            IllegalConfigurationException: no keystore, unreadable, no certificate or no key.
        """
        data = _read(self.keystore, "keystore")
        blocks = [(m.group(1).decode(), m.group(0)) for m in _PEM_BLOCK.finditer(data)]
        chain = b"".join(b if b.endswith(b"\n") else b + b"\n" for kind, b in blocks
                         if kind == "CERTIFICATE")
        keys = [(kind, b) for kind, b in blocks if kind.endswith("PRIVATE KEY")]
        if not chain or not keys:
            raise IllegalConfigurationException(
                f"the keystore {self.keystore} must hold a PEM certificate chain and a private key "
                f"(found {', '.join(k for k, _ in blocks) or 'no PEM blocks'})")
        kind, key = keys[0]
        if kind == "ENCRYPTED PRIVATE KEY" or b"ENCRYPTED" in key:
            key = _decrypt(key, self.key_password, self.keystore)
        return chain, key

    def truststore_bytes(self) -> bytes:
        """The CA bundle's PEM bytes.

        Raises:
            IllegalConfigurationException: no truststore, unreadable or without certificates.
        """
        data = _read(self.truststore, "truststore")
        if b"-----BEGIN CERTIFICATE-----" not in data:
            raise IllegalConfigurationException(
                f"the truststore {self.truststore} holds no PEM certificate")
        return data


def _read(path: str | None, what: str) -> bytes:
    if not path:
        raise IllegalConfigurationException(
            f"TLS is enabled but no {what} is configured: set security.ssl.<rest|internal>.{what} "
            "to a PEM file")
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise IllegalConfigurationException(f"cannot read the TLS {what} {path}: {exc}") from None


def _decrypt(key: bytes, password: str | None, where: str | None) -> bytes:
    if not password:
        raise IllegalConfigurationException(
            f"the private key in {where} is encrypted: set its key-password")
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:  # pragma: no cover - cryptography is a dependency of the TLS set-up
        raise IllegalConfigurationException(
            f"the private key in {where} is encrypted; RPC TLS needs an unencrypted key or the "
            "'cryptography' package to decrypt it") from None
    try:
        loaded = serialization.load_pem_private_key(key, password.encode("utf-8"))
    except (ValueError, TypeError) as exc:
        raise IllegalConfigurationException(
            f"cannot decrypt the private key in {where}: {exc}") from None
    return loaded.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())


def is_rest_ssl_enabled(configuration: Configuration) -> bool:
    """``security.ssl.rest.enabled``."""
    return bool(configuration.get(SSL_REST_ENABLED))


def is_internal_ssl_enabled(configuration: Configuration) -> bool:
    """``security.ssl.internal.enabled``."""
    return bool(configuration.get(SSL_INTERNAL_ENABLED))


def rest_scheme(configuration: Configuration) -> str:
    """``"https"`` with REST TLS enabled, else ``"http"``."""
    return "https" if is_rest_ssl_enabled(configuration) else "http"


def rest_pem_files(configuration: Configuration) -> PemFiles:
    """The REST scope's PEM settings."""
    return PemFiles(configuration.get(SSL_REST_KEYSTORE), configuration.get(SSL_REST_KEY_PASSWORD),
                    configuration.get(SSL_REST_TRUSTSTORE),
                    bool(configuration.get(SSL_REST_AUTHENTICATION)))


def internal_pem_files(configuration: Configuration) -> PemFiles:
    """The internal (RPC) scope's PEM settings; always mutual, as in Flink."""
    return PemFiles(configuration.get(SSL_INTERNAL_KEYSTORE),
                    configuration.get(SSL_INTERNAL_KEY_PASSWORD),
                    configuration.get(SSL_INTERNAL_TRUSTSTORE), True)


def rest_server_settings(configuration: Configuration) -> dict[str, Any]:
    """uvicorn's TLS keywords for the REST server (empty without REST TLS).

    Raises:
        IllegalConfigurationException: TLS is enabled without a readable keystore, or mutual
            authentication without a truststore.
    """
    if not is_rest_ssl_enabled(configuration):
        return {}
    pem = rest_pem_files(configuration)
    pem.certificate_chain_and_key()  # fail early, naming the key, on a missing or bad file
    settings: dict[str, Any] = {"ssl_certfile": str(Path(pem.keystore or "").expanduser()),
                                "ssl_keyfile_password": pem.key_password}
    if pem.mutual:
        pem.truststore_bytes()
        settings["ssl_ca_certs"] = str(Path(pem.truststore or "").expanduser())
        settings["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return settings


def rest_client_ssl_context(configuration: Configuration) -> ssl.SSLContext | None:
    """The context REST clients verify the server with (None without REST TLS).

    Trusts ``security.ssl.rest.truststore`` (else the system's CAs) and checks host names; with
    mutual authentication it presents the keystore's certificate.

    Raises:
        IllegalConfigurationException: a configured file is unreadable or invalid.
    """
    if not is_rest_ssl_enabled(configuration):
        return None
    pem = rest_pem_files(configuration)
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if pem.truststore:
        context.load_verify_locations(cadata=pem.truststore_bytes().decode("ascii"))
    if pem.mutual:
        try:
            context.load_cert_chain(str(Path(pem.keystore or "").expanduser()),
                                    password=pem.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise IllegalConfigurationException(
                f"cannot load the REST client certificate {pem.keystore}: {exc}") from None
    return context


def rest_client_settings(configuration: Configuration) -> dict[str, str]:
    """The ``security.ssl.rest.*`` keys a client process started by the JobManager needs to reach
    its REST endpoint (web submission's ``flintlock run``); empty without REST TLS.

    Key passwords are left out (they would show in the process list): a client certificate for
    mutual REST TLS must then have an unencrypted key.
    """
    if not is_rest_ssl_enabled(configuration):
        return {}
    keys = (SSL_REST_ENABLED, SSL_REST_TRUSTSTORE, SSL_REST_AUTHENTICATION, SSL_REST_KEYSTORE)
    return {opt.key: str(configuration.get(opt)).lower() if isinstance(configuration.get(opt), bool)
            else str(configuration.get(opt)) for opt in keys if configuration.get(opt) is not None}
