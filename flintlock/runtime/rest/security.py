"""REST security: the bearer-secret check of state-changing calls and the ``Host`` header check.

- ``authenticate(request, secret, action)``: calls that change the cluster or run code
  (``POST /jobs``, ``/jars/*`` uploads and runs, savepoints, stop-with-savepoint, collecting a job's
  rows, ``DELETE /cluster``) need ``Authorization: Bearer <security.cluster.secret>``; without it
  they get 401 with ``WWW-Authenticate: Bearer realm="flintlock"``. Cancelling a job
  (``PATCH /jobs/:jobid``) stays open, as in Flink, and reads never need the secret.
- ``HostCheckMiddleware``: a web page on another site can make a browser send requests to
  ``127.0.0.1:8081`` through a DNS name it controls (DNS rebinding); such requests name that site
  in ``Host``. The middleware answers 400 to any ``Host`` that is not an IP address, ``localhost``,
  ``rest.address``, ``rest.bind-address``, this machine's host name or one of
  ``rest.server.allowed-hosts`` (``*`` turns the check off).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import socket
from collections.abc import Iterable

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from flintlock.config import Configuration
from flintlock.config.options import REST_ADDRESS, REST_ALLOWED_HOSTS, REST_BIND_ADDRESS
from flintlock.runtime.rest.errors import RestHandlerException, error_body

__all__ = ["HostCheckMiddleware", "allowed_host_names", "authenticate", "host_name_of"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="flintlock"'}


def authenticate(request: Request, secret: str | None, action: str = "Job submission") -> None:
    """Require ``Authorization: Bearer <security.cluster.secret>``.

    The token is compared in constant time (``hmac.compare_digest``), before the request body is
    read.

    Raises:
        RestHandlerException: 401 naming ``action`` when the cluster has no secret or the header
            is missing or wrong.
    """
    if secret is None:
        raise RestHandlerException(
            401, f"{action} is disabled: the cluster has no security.cluster.secret.", _CHALLENGE)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode("utf-8"), secret.encode("utf-8")
    ):
        raise RestHandlerException(
            401, f"{action} requires the header 'Authorization: Bearer <cluster secret>' "
                 "with the cluster's security.cluster.secret (for `flintlock cluster start`, the "
                 "file 'secret' in its state directory).", _CHALLENGE)


def host_name_of(header: str) -> str:
    """The host part of a ``Host`` header, lower-cased (``[::1]:8081`` -> ``::1``)."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1:text.find("]")] if "]" in text else text
    return text.rpartition(":")[0] if text.count(":") == 1 else text


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _machine_names() -> tuple[str, str]:
    """This machine's host name and FQDN (``getfqdn`` may ask DNS: once per process)."""
    return socket.gethostname(), socket.getfqdn()


def allowed_host_names(configuration: Configuration,
                       machine_names: Iterable[str] | None = None) -> frozenset[str] | None:
    """The ``Host`` names the REST server answers to (besides IP addresses); None: any.

    Args:
        configuration: ``rest.address``, ``rest.bind-address``, ``rest.server.allowed-hosts``.
        machine_names: this machine's names (default: ``socket.gethostname()`` and ``getfqdn()``).
    """
    extra = tuple(configuration.get(REST_ALLOWED_HOSTS))
    if "*" in extra:
        return None
    if machine_names is None:
        machine_names = _machine_names()
    names = {"localhost", str(configuration.get(REST_ADDRESS)),
             str(configuration.get(REST_BIND_ADDRESS)), *machine_names, *extra}
    return frozenset(host_name_of(n) for n in names if n)


class HostCheckMiddleware:
    """ASGI middleware: 400 for HTTP requests whose ``Host`` names a host this server is not.

    Args:
        app: the wrapped ASGI app.
        allowed: names from ``allowed_host_names`` (IP addresses are always allowed); None allows
            every host.
    """

    def __init__(self, app: ASGIApp, allowed: frozenset[str] | None) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed is None:
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"),
                      "")
        host = host_name_of(header)
        if host and (_is_ip(host) or host in self.allowed):
            await self.app(scope, receive, send)
            return
        shown = header[:100] or "(none)"
        response = JSONResponse(error_body(
            f"Bad request, Host {shown!r} is not a name of this JobManager; add it to "
            "rest.server.allowed-hosts if clients reach the REST server under that name."),
            status_code=400)
        await response(scope, receive, send)
