"""A throw-away certificate authority for TLS tests (``cryptography``; nothing leaves the test).

``make_ca(directory)`` writes ``ca.pem`` (the truststore) and returns a ``TestCA`` that issues
certificates: ``ca.issue("server", hosts=("127.0.0.1", "localhost"))`` writes ``server.pem``, the
certificate chain followed by the private key (flintlock's PEM keystore layout), optionally with
the key encrypted under ``password``.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TestCA", "make_ca"]


def _name(common_name: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


@dataclass
class TestCA:
    """A CA whose certificate is in ``truststore`` (PEM)."""

    __test__ = False  # not a pytest test class

    directory: Path
    truststore: Path
    _key: Any
    _cert: Any

    def issue(self, name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
              password: str | None = None) -> Path:
        """Write ``<name>.pem`` (certificate, then private key) for ``hosts``; its path."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID

        key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(self._cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(self._key, hashes.SHA256())
        )
        encryption: Any = (serialization.BestAvailableEncryption(password.encode())
                           if password else serialization.NoEncryption())
        pem = cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        path = self.directory / f"{name}.pem"
        path.write_bytes(pem)
        path.chmod(0o600)
        return path


def make_ca(directory: Path, name: str = "flintlock test CA") -> TestCA:
    """A new CA in ``directory`` (its certificate in ``ca.pem``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    directory.mkdir(parents=True, exist_ok=True)
    key = _key()
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name)).issuer_name(_name(name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    truststore = directory / "ca.pem"
    truststore.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return TestCA(directory, truststore, key, cert)
