"""A small ``multipart/form-data`` parser for ``POST /jobs`` (RFC 7578 over RFC 2046).

The body has already been read (bounded by ``rest.server.max-content-length``), so parsing works
on bytes; part contents are returned byte-exact (binary pickles included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MultipartError", "Part", "boundary_of", "parse_multipart"]

_PARAM = re.compile(r';\s*([A-Za-z0-9_*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)')


class MultipartError(ValueError):
    """The body is not well-formed multipart/form-data (the message says where)."""


@dataclass(frozen=True)
class Part:
    """One part: its form field ``name``, optional ``filename``, content type and bytes."""

    name: str
    filename: str | None
    content_type: str | None
    data: bytes


def _params(header_value: str) -> tuple[str, dict[str, str]]:
    value, _, rest = header_value.partition(";")
    params = {}
    for m in _PARAM.finditer(";" + rest):
        raw = m.group(2)
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params[m.group(1).lower()] = raw
    return value.strip().lower(), params


def boundary_of(content_type: str | None) -> str:
    """The boundary of a ``multipart/form-data`` content type; ``MultipartError`` otherwise."""
    kind, params = _params(content_type or "")
    if kind != "multipart/form-data":
        raise MultipartError(f"expected Content-Type multipart/form-data, got {content_type!r}")
    boundary = params.get("boundary", "")
    if not boundary or len(boundary) > 200:
        raise MultipartError("the multipart/form-data Content-Type has no valid boundary")
    return boundary


def parse_multipart(body: bytes, boundary: str) -> list[Part]:
    """Split ``body`` into its parts."""
    delimiter = b"--" + boundary.encode("latin-1")
    if body.startswith(delimiter):
        pos = len(delimiter)
    else:
        first = body.find(b"\r\n" + delimiter)
        if first < 0:
            raise MultipartError("the body does not contain the multipart boundary")
        pos = first + 2 + len(delimiter)
    parts: list[Part] = []
    while True:
        if body.startswith(b"--", pos):
            return parts
        line_end = body.find(b"\r\n", pos)
        if line_end < 0:
            raise MultipartError("the multipart body ends without a closing boundary")
        start = line_end + 2
        end = body.find(b"\r\n" + delimiter, start)
        if end < 0:
            raise MultipartError("the multipart body ends without a closing boundary")
        parts.append(_part(body[start:end]))
        pos = end + 2 + len(delimiter)


def _part(raw: bytes) -> Part:
    head, sep, data = raw.partition(b"\r\n\r\n")
    if not sep:
        if raw.startswith(b"\r\n"):  # no headers at all
            head, data = b"", raw[2:]
        else:
            raise MultipartError("a multipart part has no blank line after its headers")
    headers: dict[str, str] = {}
    for line in head.decode("utf-8", "replace").split("\r\n"):
        if line:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
    disposition, params = _params(headers.get("content-disposition", ""))
    if disposition != "form-data" or "name" not in params:
        raise MultipartError("a multipart part has no Content-Disposition: form-data; name=...")
    return Part(params["name"], params.get("filename"), headers.get("content-type"), data)
