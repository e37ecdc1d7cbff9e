"""Which configuration values are secrets, and how they are hidden wherever configuration is shown.

Follows Flink's ``GlobalConfiguration.isSensitive`` / ``HIDDEN_CONTENT``: a key is sensitive when it
contains one of Flink's fragments (``password``, ``secret``, ``token``, ``apikey``, ...). flintlock
adds ``credential`` and keys whose last dotted/dashed component ends in ``key``
(``fs.s3a.access.key``, ``spark.hadoop.fs.azure.account.key``, ``ssl.private-key``), which Flink
covers one by one. A sensitive value is shown as ``******``.

Values of other keys may carry credentials too: a Spark Connect URL
``sc://host:15002/;token=abc;user_id=me``, a URL with ``user:password@``, a ``?token=`` query.
``hide_credentials`` masks those parts of any text; configuration endpoints, log lines and exception
messages pass what they show through it.

The cluster secret (``security.cluster.secret``) never enters a job's configuration at all
(``job_configuration``): jobs do not need it, and a job's configuration is served by
``GET /jobs/:jobid/config`` and stored with the job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "HIDDEN_CONTENT",
    "JOB_EXCLUDED_KEYS",
    "hidden_items",
    "hide_credentials",
    "hide_value",
    "is_sensitive",
    "job_configuration",
]

#: What a hidden value is shown as (Flink ``GlobalConfiguration.HIDDEN_CONTENT``).
HIDDEN_CONTENT = "******"

#: Flink's ``GlobalConfiguration.SENSITIVE_KEYS`` plus ``credential``.
_FRAGMENTS = ("password", "secret", "fs.azure.account.key", "apikey", "api-key", "auth-params",
              "service-key", "token", "basic-auth", "jaas.config", "http-headers", "credential")

#: Keys that never enter a job's configuration (the client's copy of the cluster secret).
JOB_EXCLUDED_KEYS = frozenset({"security.cluster.secret"})

# `token=...`, `password=...` parameters of URLs (`;` Spark Connect, `?`/`&` queries), and the
# password of `scheme://user:password@host`; `Bearer <token>` in header-like text.
_PARAM = re.compile(r"(?i)\b([a-z_]*(?:token|password|secret|key|credential)[a-z_]*=)([^;&\s'\"]+)")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/:@\s'\"]*:)([^@/\s'\"]+)(@)")
_BEARER = re.compile(r"(?i)\b(bearer\s+)([^\s'\",;]+)")
_COMPONENT = re.compile(r"[.\-_]")


def is_sensitive(key: str) -> bool:
    """Whether ``key``'s value is a secret (Flink's fragments, ``credential``, or ``...key``).

    ``security.cluster.secret``, ``spark.hadoop.fs.s3a.secret.key``, ``fs.s3a.access.key``,
    ``metrics.reporter.x.password`` are; ``state.backend.type`` and ``keystore`` paths' names
    (``security.ssl.rest.keystore``) are not.
    """
    lowered = key.lower()
    if any(fragment in lowered for fragment in _FRAGMENTS):
        return True
    last = _COMPONENT.split(lowered)[-1]
    return last.endswith("key")


def hide_credentials(text: str) -> str:
    """``text`` with URL passwords, ``token=``/``password=``-style parameters and bearer tokens
    replaced by ``******`` (``sc://h:15002/;token=abc`` -> ``sc://h:15002/;token=******``)."""
    text = _USERINFO.sub(lambda m: m.group(1) + HIDDEN_CONTENT + m.group(3), text)
    text = _PARAM.sub(lambda m: m.group(1) + HIDDEN_CONTENT, text)
    return _BEARER.sub(lambda m: m.group(1) + HIDDEN_CONTENT, text)


def hide_value(key: str, value: Any) -> str:
    """What may be shown of ``key: value``: ``******`` for a sensitive key, else the value as
    text with embedded credentials hidden."""
    if is_sensitive(key):
        return HIDDEN_CONTENT
    return hide_credentials(str(value))


def hidden_items(items: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> dict[str, str]:
    """``{key: hide_value(key, value)}`` of a configuration (None values dropped)."""
    pairs = items.items() if isinstance(items, Mapping) else items
    return {str(k): hide_value(str(k), v) for k, v in pairs if v is not None}


def job_configuration(items: Mapping[str, Any]) -> dict[str, str]:
    """The configuration a job carries: ``items`` as strings minus ``JOB_EXCLUDED_KEYS``."""
    return {str(k): str(v) for k, v in items.items()
            if v is not None and str(k) not in JOB_EXCLUDED_KEYS}
