"""``POST /jars/upload`` streams the body to disk (issue 16, defect 7): bounded memory for a large
program, 413 past ``rest.server.max-content-length`` without leftovers, and the streaming
multipart parser's edge cases."""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import random
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flintlock.config import Configuration
from flintlock.runtime.rest import RestServer, create_app
from flintlock.runtime.rest.jar_store import JarStore
from flintlock.runtime.rest.multipart import FilePartParser, MultipartError

SECRET = "s3cret-token"  # the harness's secret (conftest.SECRET)
AUTH = {"Authorization": f"Bearer {SECRET}"}
BOUNDARY = "flintlock-test-boundary"
HEAD = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"jarfile\"; "
        f"filename=\"big.py\"\r\nContent-Type: text/x-python\r\n\r\n").encode()
TAIL = f"\r\n--{BOUNDARY}--\r\n".encode()
#: one 64 KiB chunk of program text, sent again and again
CHUNK = b"".join(b"x_%06d = %d  # padding to make a big program\n" % (i, i)
                 for i in range(1500))[: 64 * 1024]


async def _body(chunks: int) -> AsyncIterator[bytes]:
    yield HEAD
    for _ in range(chunks):
        yield CHUNK
    yield TAIL


async def _upload(url: str, chunks: int) -> httpx.Response:
    """POST a program of ``chunks`` x 64 KiB, streamed (chunked transfer encoding)."""
    headers = {**AUTH, "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        return await client.post("/jars/upload", content=_body(chunks), headers=headers)


def _serve(upload_dir: Path, test: Any, **conf: str) -> Any:
    async def main() -> Any:
        configuration = Configuration({"web.upload.dir": str(upload_dir), **conf})
        server = RestServer(create_app(None, configuration, secret=SECRET),  # type: ignore[arg-type]
                            port=0)
        await server.start()
        try:
            return await test(server.url)
        finally:
            await server.stop()

    return asyncio.run(main())


@pytest.fixture
def begun(monkeypatch) -> list[Any]:
    """The ``ProgramUpload``s ``JarStore.begin_upload`` returns, in order."""
    uploads: list[Any] = []
    begin_upload = JarStore.begin_upload

    def recording_begin_upload(self: JarStore, filename: str) -> Any:
        upload = begin_upload(self, filename)
        uploads.append(upload)
        return upload

    monkeypatch.setattr(JarStore, "begin_upload", recording_begin_upload)
    return uploads


def test_a_large_upload_is_streamed_to_disk_in_bounded_memory(tmp_path: Path):
    chunks = 640  # 40 MiB
    tracemalloc.start()
    try:
        def measured(url: str) -> Any:
            tracemalloc.reset_peak()
            return _upload(url, chunks)

        response = _serve(tmp_path, measured, **{"rest.server.max-content-length": "64m"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 200, response.text
    assert peak < 8 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB of Python allocations"
    stored = Path(response.json()["filename"])
    assert stored.parent == tmp_path / "flintlock-web-upload"
    assert stored.stat().st_size == chunks * len(CHUNK)
    expected, actual = hashlib.sha256(), hashlib.sha256()
    for _ in range(chunks):
        expected.update(CHUNK)
    with stored.open("rb") as f:
        while block := f.read(1 << 20):
            actual.update(block)
    assert actual.hexdigest() == expected.hexdigest()
    assert [p.name for p in stored.parent.iterdir()] == [stored.name]  # no temporary file left


def test_an_upload_over_the_limit_is_413_and_leaves_no_file(tmp_path: Path, begun):
    response = _serve(tmp_path, lambda url: _upload(url, 64),  # 4 MiB
                      **{"rest.server.max-content-length": "1m"})
    assert response.status_code == 413
    assert response.json()["errors"] == [
        "The upload exceeds rest.server.max-content-length (1048576 bytes)."]
    (upload,) = begun  # part of the program had been written when the limit was passed
    assert upload.size > 0 and not upload.temp_path.exists()
    assert list((tmp_path / "flintlock-web-upload").iterdir()) == []


def test_an_upload_cut_off_by_the_client_leaves_no_file(tmp_path: Path, begun, caplog):
    async def test(url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"POST /jars/upload HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer "
                     f"{SECRET}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                     f"Content-Length: {10 << 20}\r\n\r\n".encode() + HEAD)
        for _ in range(16):  # 1 MiB of the promised 10
            writer.write(CHUNK)
        await writer.drain()
        deadline = time.monotonic() + 10
        while not begun or begun[0].size == 0:  # the server has written some of it
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        writer.close()
        while begun[0].temp_path.exists():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)

    with caplog.at_level(logging.ERROR):
        _serve(tmp_path, test)
    assert list((tmp_path / "flintlock-web-upload").iterdir()) == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# ---- through the TestClient harness -------------------------------------------------------------


@pytest.fixture
def web(make_rest, tmp_path: Path):
    return make_rest({"web.upload.dir": str(tmp_path)})


def _post(h, body: bytes, boundary: str = BOUNDARY):
    return h.client.post("/jars/upload", content=body, headers={
        **AUTH, "Content-Type": f"multipart/form-data; boundary={boundary}"})


def _part(name: str, data: bytes, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return (f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n").encode() + data + b"\r\n"


def test_the_first_file_part_named_jarfile_is_stored(web, tmp_path: Path):
    program = b"print('a')\r\n--flintlock-test-boundar\r\n--x\r\n" * 3  # near-boundaries
    body = (_part("jarfile", b"not a file") + _part("other", b"x", "other.py")
            + _part("jarfile", program, "prog.py") + _part("jarfile", b"second", "two.py")
            + f"--{BOUNDARY}--\r\n".encode())
    r = _post(web, body)
    assert r.status_code == 200, r.text
    stored = Path(r.json()["filename"])
    assert stored.name.endswith("_prog.py") and stored.read_bytes() == program
    assert sorted(p.name for p in stored.parent.iterdir()) == [stored.name]


@pytest.mark.parametrize(("body", "message"), [
    (_part("jarfile", b"print(1)\n", "a.py"), "ends without a closing boundary"),
    (b"garbage" * 10, "malformed multipart/form-data body"),
    (f"--{BOUNDARY}\r\nContent-Type: text/plain\r\n\r\nx\r\n--{BOUNDARY}--\r\n".encode(),
     "no Content-Disposition"),
    (_part("jarfile", b"\xff\xfe", "a.py") + f"--{BOUNDARY}--\r\n".encode(), "not UTF-8"),
    (_part("jarfile", b"\xe2\x82", "a.py") + f"--{BOUNDARY}--\r\n".encode(), "not UTF-8"),
    (_part("jarfile", b"x = 1", "a.jar") + f"--{BOUNDARY}--\r\n".encode(), "end with '.py'"),
    (_part("jarfile", b" \r\n\t", "a.py") + f"--{BOUNDARY}--\r\n".encode(), "is empty"),
])
def test_bad_bodies_are_400_and_leave_no_file(web, tmp_path: Path, body, message):
    r = _post(web, body)
    assert r.status_code == 400, r.text
    assert message in r.json()["errors"][0]
    store = tmp_path / "flintlock-web-upload"
    assert not store.exists() or list(store.iterdir()) == []


def test_the_parser_gives_the_same_bytes_however_the_body_is_cut():
    rng = random.Random(16)
    program = bytes(rng.randrange(256) for _ in range(5000)).replace(b"\r", b"\r\n--flint")
    body = (_part("a", b"1") + _part("jarfile", program, "p.py")
            + f"--{BOUNDARY}--\r\n".encode())
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randrange(1, 50)))
        pieces = [body[i:j] for i, j in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        sink = io.BytesIO()
        parser = FilePartParser(BOUNDARY, "jarfile", lambda _name, out=sink: out)
        for piece in pieces:
            parser.feed([piece])
        assert parser.finish() == "p.py"
        assert sink.getvalue() == program and parser.file_bytes == len(program)


def test_the_parser_bounds_part_headers():
    body = f"--{BOUNDARY}\r\nX-Big: {'a' * 20000}\r\n\r\n".encode()
    parser = FilePartParser(BOUNDARY, "jarfile", lambda _name: io.BytesIO())
    with pytest.raises(MultipartError):
        parser.feed([body])


def test_uploads_a_dead_process_left_are_removed_when_the_directory_is_next_used(tmp_path: Path):
    """A JobManager killed mid-upload leaves ``.upload-*.part`` in a configured upload
    directory; the next store removes those untouched for an hour, never a live upload's."""
    directory = tmp_path / "flintlock-web-upload"
    directory.mkdir()
    stale, live = directory / ".upload-dead.part", directory / ".upload-live.part"
    stale.write_bytes(b"print(1)")
    live.write_bytes(b"print(2)")
    hours_ago = time.time() - 2 * 3600
    os.utime(stale, (hours_ago, hours_ago))
    program = directory / ("0" * 32 + "_kept.py")
    program.write_text("print(3)")
    os.utime(program, (hours_ago, hours_ago))  # programs are not uploads: they stay
    store = JarStore(str(tmp_path))
    assert [p.id for p in store.programs()] == [program.name]
    assert sorted(p.name for p in directory.iterdir()) == sorted([program.name, live.name])
