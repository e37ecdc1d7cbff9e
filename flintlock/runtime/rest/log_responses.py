"""HTTP responses for log files: whole, paged (``?start=&count=``) or by ``Range`` header.

Flink serves a log file whole. flintlock also pages it, since files are read in bounded chunks
(``LogChunk``, at most 1 MiB) wherever they are:

- no paging parameters: the whole file, streamed chunk by chunk up to its size at the first read;
- ``start`` (alias ``offset``; negative counts from the end) and ``count`` (alias ``length``,
  at most 1 MiB): that range;
- ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n``: that range as 206 Partial Content;
  416 Range Not Satisfiable with ``Content-Range: bytes */<size>`` when ``a >= size`` or
  ``n == 0`` (RFC 9110 14.1.1; positions of more than 18 digits are past the end of any file and
  are never converted whole); 400 for anything else (other units, several ranges, ``b < a``).

Every answer is ``text/plain; charset=utf-8`` with ``X-Log-Size`` (file size in bytes),
``X-Log-Start`` and ``X-Log-End`` (exclusive) headers; ``download=true`` adds
``Content-Disposition: attachment``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from flintlock.runtime.logs.files import MAX_LOG_CHUNK_BYTES, LogChunk
from flintlock.runtime.rest.errors import RestHandlerException

__all__ = ["LogReader", "log_file_response"]

#: reads ``count`` bytes from ``start`` of one file
LogReader = Callable[[int, int], Awaitable[LogChunk]]

_MEDIA_TYPE = "text/plain; charset=utf-8"
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
#: a byte position of more digits than this is read as ``_BEYOND_ANY_FILE``
_MAX_POSITION_DIGITS = 18
#: past the end of any log file, and still a 64-bit integer over the wire
_BEYOND_ANY_FILE = 10**_MAX_POSITION_DIGITS


def _headers(chunk: LogChunk, download: bool, end: int | None = None) -> dict[str, str]:
    headers = {
        "X-Log-Size": str(chunk.size),
        "X-Log-Start": str(chunk.start),
        "X-Log-End": str(chunk.end if end is None else end),
        "Cache-Control": "no-store",
    }
    if download:
        headers["Content-Disposition"] = f'attachment; filename="{chunk.name}"'
    return headers


def _position(digits: str) -> int:
    """A byte position from its digits; more than 18 digits: ``_BEYOND_ANY_FILE``."""
    digits = digits.lstrip("0") or "0"
    return _BEYOND_ANY_FILE if len(digits) > _MAX_POSITION_DIGITS else int(digits)


def _parse_range(header: str) -> tuple[int, int | None]:
    """``bytes=a-b`` -> (a, b+1 - a); ``bytes=a-`` -> (a, None); ``bytes=-n`` -> (-n, None).

    Positions are bounded by ``_BEYOND_ANY_FILE``; ``bytes=-0`` (satisfiable by no file) is
    ``(_BEYOND_ANY_FILE, None)``.

    Raises:
        RestHandlerException: 400 for a malformed header or ``b < a``.
    """
    m = _RANGE.match(header)
    if not m or (not m.group(1) and not m.group(2)):
        raise RestHandlerException(400, f"Bad request, invalid Range header {header[:100]!r} "
                                        "(expected bytes=<first>-<last>).")
    first, last = m.group(1), m.group(2)
    if not first:
        suffix = _position(last)
        return (-suffix if suffix else _BEYOND_ANY_FILE), None
    start = _position(first)
    if not last:
        return start, None
    end = _position(last)
    if end < start:
        raise RestHandlerException(400, f"Bad request, invalid Range header {header[:100]!r}.")
    return start, end + 1 - start


async def log_file_response(read: LogReader, request: Request, start: int | None,
                            count: int | None, download: bool) -> Response:
    """The response for one log file (see the module docstring).

    Raises:
        RestHandlerException: 400 for a negative ``count`` or a malformed ``Range``.
        Exception: whatever ``read`` raises.
    """
    if count is not None and count < 0:
        raise RestHandlerException(400, "Bad request, invalid query parameter count: must be >= 0.")
    range_header = request.headers.get("range")
    if start is not None or count is not None:
        chunk = await read(start or 0, MAX_LOG_CHUNK_BYTES if count is None else count)
        return Response(chunk.data, media_type=_MEDIA_TYPE, headers=_headers(chunk, download))
    if range_header:
        range_start, length = _parse_range(range_header)
        chunk = await read(range_start, min(MAX_LOG_CHUNK_BYTES, length or MAX_LOG_CHUNK_BYTES))
        if range_start >= chunk.size:
            return Response(status_code=416, headers={"Content-Range": f"bytes */{chunk.size}"})
        headers = _headers(chunk, download)
        headers["Content-Range"] = (f"bytes {chunk.start}-{max(chunk.start, chunk.end - 1)}/"
                                    f"{chunk.size}")
        return Response(chunk.data, status_code=206, media_type=_MEDIA_TYPE, headers=headers)
    first = await read(0, MAX_LOG_CHUNK_BYTES)
    if first.end >= first.size:
        return Response(first.data, media_type=_MEDIA_TYPE, headers=_headers(first, download))

    async def rest_of_file() -> AsyncIterator[bytes]:
        yield first.data
        offset = first.end
        while offset < first.size:
            chunk = await read(offset, min(MAX_LOG_CHUNK_BYTES, first.size - offset))
            if not chunk.data:
                return
            yield chunk.data
            offset = chunk.end

    return StreamingResponse(rest_of_file(), media_type=_MEDIA_TYPE,
                             headers=_headers(first, download, end=first.size))
