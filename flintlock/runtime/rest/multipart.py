"""``multipart/form-data`` bodies (RFC 7578 over RFC 2046), parsed by python-multipart (what
FastAPI itself uses): whole, or streamed into a sink.

- ``parse_multipart``: for ``POST /jobs``, whose body has already been read (bounded by
  ``rest.server.max-content-length``); part contents are returned byte-exact (binary pickles
  included).
- ``FilePartParser``: for ``POST /jars/upload``, fed the body chunk by chunk as it arrives; the
  bytes of one file part go to a sink as they are parsed, so no more than a chunk of the body is
  in memory at once.

Both cap a part's headers at 16 KiB and reject a body with a preamble before its first boundary
(as python-multipart does; HTTP clients never send one).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from python_multipart import MultipartParser
from python_multipart.exceptions import FormParserError

__all__ = ["FilePartParser", "MultipartError", "Part", "PartSink", "boundary_of",
           "parse_multipart"]

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


class PartSink(Protocol):
    """Where ``FilePartParser`` writes a file part's bytes."""

    def write(self, data: bytes) -> object: ...


class _AtDebug(logging.LoggerAdapter):  # type: ignore[type-arg]
    """python-multipart's logger, everything at DEBUG: it warns once per malformed body, which
    the client is told in its 400 answer; a client must not be able to fill the log with it."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        super().log(logging.DEBUG, msg, *args, **kwargs)


_PARSER_LOG = _AtDebug(logging.getLogger(__name__ + ".python_multipart"))


class _StreamingParser:
    """python-multipart's ``MultipartParser`` fed in chunks; ``_begin_part`` decides, from a
    part's headers, the sink its bytes go to (None: dropped)."""

    #: most bytes handed to python-multipart at once (a longer chunk is split; its callbacks
    #: copy at most this much)
    STEP_BYTES = 1 << 20
    #: most bytes of headers one part may have
    MAX_HEADER_BYTES = 16 * 1024

    def __init__(self, boundary: str) -> None:
        self._sink: PartSink | None = None
        self._writing = False
        self._ended = False
        self._header_bytes = 0
        self._name = bytearray()
        self._value = bytearray()
        self._headers: dict[str, str] = {}
        self._parser = MultipartParser(boundary.encode("latin-1"), {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        })
        self._parser.logger = _PARSER_LOG  # type: ignore[assignment]

    def feed(self, chunks: Iterable[bytes]) -> None:
        """Parse the next chunks of the body (blocking).

        Raises:
            MultipartError: the body is not well-formed multipart/form-data.
            Exception: what ``open_sink`` or the sink's ``write`` raises.
        """
        for chunk in chunks:
            for start in range(0, len(chunk), self.STEP_BYTES):
                try:
                    self._parser.write(chunk[start:start + self.STEP_BYTES])
                except FormParserError as exc:
                    raise MultipartError(f"malformed multipart/form-data body ({exc})") from None

    def _check_ended(self) -> None:
        if not self._ended:
            raise MultipartError("the multipart body ends without a closing boundary")

    def _begin_part(self, name: str, filename: str | None,
                    content_type: str | None) -> PartSink | None:
        raise NotImplementedError

    def _end_part(self) -> None:
        """After a part's last byte."""

    def _part_begin(self) -> None:
        self._headers = {}
        self._header_bytes = 0
        self._name.clear()
        self._value.clear()

    def _count_header_bytes(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.MAX_HEADER_BYTES:
            raise MultipartError(f"a multipart part has more than {self.MAX_HEADER_BYTES} bytes "
                                 "of headers")

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header_bytes(end - start)
        self._name += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header_bytes(end - start)
        self._value += data[start:end]

    def _header_end(self) -> None:
        name = self._name.decode("utf-8", "replace").strip().lower()
        self._headers[name] = self._value.decode("utf-8", "replace").strip()
        self._name.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        disposition, params = _params(self._headers.get("content-disposition", ""))
        if disposition != "form-data" or "name" not in params:
            raise MultipartError("a multipart part has no Content-Disposition: form-data; name=...")
        sink = self._begin_part(params["name"], params.get("filename"),
                                self._headers.get("content-type"))
        self._writing = sink is not None
        if sink is not None:
            self._sink = sink

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._writing and self._sink is not None:
            self._sink.write(data[start:end])
            self._count_data(end - start)

    def _count_data(self, n: int) -> None:
        """``n`` more bytes of the current part went to its sink."""

    def _part_end(self) -> None:
        if self._writing:
            self._end_part()
        self._writing = False

    def _end(self) -> None:
        self._ended = True


class FilePartParser(_StreamingParser):
    """Parses a ``multipart/form-data`` body fed in chunks; one file part goes to a sink.

    The first part named ``field`` that has a ``filename`` is the file: once its headers are
    parsed, ``open_sink(filename)`` is called and the part's bytes are written to what it
    returns, piece by piece, as they are parsed. Other parts are parsed and dropped. Blocking (the
    sink writes): call ``feed`` from a worker thread, one call at a time.

    Args:
        boundary: the body's boundary (``boundary_of``).
        field: the form field of the file (``"jarfile"``).
        open_sink: ``filename -> PartSink``; what it raises comes out of ``feed``.
    """

    def __init__(self, boundary: str, field: str, open_sink: Callable[[str], PartSink]) -> None:
        super().__init__(boundary)
        self._field = field
        self._open_sink = open_sink
        #: the file part's filename once its headers were parsed
        self.filename: str | None = None
        #: bytes of the file part written to the sink
        self.file_bytes = 0

    def finish(self) -> str | None:
        """After the last chunk: the file part's filename, ``None`` when there was none.

        Raises:
            MultipartError: the body ended before its closing boundary.
        """
        self._check_ended()
        return self.filename

    def _begin_part(self, name: str, filename: str | None,
                    content_type: str | None) -> PartSink | None:
        if self.filename is not None or name != self._field or filename is None:
            return None
        self.filename = filename
        return self._open_sink(filename)

    def _count_data(self, n: int) -> None:
        self.file_bytes += n


class _PartCollector(_StreamingParser):
    """Keeps every part in memory (``parse_multipart``)."""

    def __init__(self, boundary: str) -> None:
        super().__init__(boundary)
        self.parts: list[Part] = []
        self._current: tuple[str, str | None, str | None] | None = None
        self._data = bytearray()

    def _begin_part(self, name: str, filename: str | None,
                    content_type: str | None) -> PartSink | None:
        self._current = (name, filename, content_type)
        self._data = bytearray()
        return self

    def write(self, data: bytes) -> None:
        """The current part's next bytes (``PartSink``)."""
        self._data += data

    def _end_part(self) -> None:
        assert self._current is not None
        self.parts.append(Part(*self._current, bytes(self._data)))


def parse_multipart(body: bytes, boundary: str) -> list[Part]:
    """Split ``body`` (already read, bounded by ``rest.server.max-content-length``) into its
    parts, byte-exact (python-multipart's parser).

    Raises:
        MultipartError: the body is not well-formed multipart/form-data.
    """
    collector = _PartCollector(boundary)
    collector.feed([body])
    collector._check_ended()
    return collector.parts
