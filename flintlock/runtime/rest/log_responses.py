"""HTTP responses for log files: whole, paged (``?start=&count=``) or by ``Range`` header.

Flink serves a log file whole. flintlock also pages it, since files are read in bounded chunks
(``LogChunk``, at most 1 MiB) wherever they are:

- no paging parameters: the whole file, streamed chunk by chunk up to its size at the first read;
- ``start`` (alias ``offset``; negative counts from the end) and ``count`` (alias ``length``,
  at most 1 MiB): that range;
- ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n``: that range as 206 Partial Content
  (416 past the end).

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


def _parse_range(header: str) -> tuple[int, int | None]:
    """``bytes=a-b`` -> (a, b+1 - a); ``bytes=a-`` -> (a, None); ``bytes=-n`` -> (-n, None)."""
    m = _RANGE.match(header)
    if not m or (not m.group(1) and not m.group(2)):
        raise RestHandlerException(400, f"Bad request, invalid Range header {header[:100]!r} "
                                        "(expected bytes=<first>-<last>).")
    first, last = m.group(1), m.group(2)
    if not first:
        return -int(last), None
    if last and int(last) < int(first):
        raise RestHandlerException(400, f"Bad request, invalid Range header {header[:100]!r}.")
    return int(first), (int(last) + 1 - int(first)) if last else None


async def log_file_response(read: LogReader, request: Request, start: int | None,
                            count: int | None, download: bool) -> Response:
    """The response for one log file (see the module docstring).

    Raises:
        RestHandlerException: 400 for a negative ``count`` or a malformed ``Range``.
    """
    if count is not None and count < 0:
        raise RestHandlerException(400, "Bad request, invalid query parameter count: must be >= 0.")
    range_header = request.headers.get("range")
    if start is not None or count is not None:
        chunk = await read(start or 0, MAX_LOG_CHUNK_BYTES if count is None else count)
        return Response(chunk.data, media_type=_MEDIA_TYPE, headers=_headers(chunk, download))
    if range_header:
        range_start, length = _parse_range(range_header)
        chunk = await read(range_start, MAX_LOG_CHUNK_BYTES if length is None else length)
        if range_start >= 0 and range_start >= chunk.size and chunk.size > 0:
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
