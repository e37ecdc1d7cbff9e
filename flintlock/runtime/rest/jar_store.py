"""``JarStore``: the programs uploaded for web submission (Flink's ``web.upload.dir`` jars).

flintlock "jars" are Python program files (``.py``). Each upload is stored as
``<32 hex>_<name>.py`` (Flink's ``<uuid>_<name>.jar``) in ``<web.upload.dir>/flintlock-web-upload``,
or in a temporary directory removed when the store is garbage-collected or the process exits.
A jar id is that file name; ids and names are validated, so no request path reaches the file
system unchecked. An upload is written to a hidden temporary file in that directory as it arrives
(``ProgramUpload``) and renamed to its id once it is complete and valid, so a program is listed
whole or not at all.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

from flintlock.exceptions import FlintlockException

log = logging.getLogger(__name__)

__all__ = ["STALE_UPLOAD_S", "JarNotFoundException", "JarStore", "ProgramUpload",
           "StoredProgram", "UploadRejectedException", "remove_stale_uploads"]

_ID = re.compile(r"^[0-9a-f]{32}_[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.py$")
_MAX_NAME = 128


class JarNotFoundException(FlintlockException):
    """No uploaded program has the requested id."""


class UploadRejectedException(FlintlockException):
    """An upload is not acceptable (not a ``.py`` file, not UTF-8 text, empty); says why."""


@dataclass(frozen=True)
class StoredProgram:
    """An uploaded program: ``id`` (file name), original ``name``, ``path``, ``uploaded_ms``."""

    id: str
    name: str
    path: Path
    uploaded_ms: int


def _clean_name(filename: str) -> str:
    base = re.split(r"[\\/]", filename or "")[-1].strip()
    if not base.lower().endswith(".py") or len(base) <= 3:
        raise UploadRejectedException(
            f"Only Python programs can be uploaded: {base[:100]!r} does not end with '.py'.")
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", base[:-3]).lstrip("._-")[: _MAX_NAME - 3] or "program"
    return stem + ".py"


def _describe(path: Path) -> StoredProgram:
    return StoredProgram(path.name, path.name.split("_", 1)[1], path,
                         int(path.stat().st_mtime * 1000))


class ProgramUpload:
    """One program being uploaded into ``directory`` (see ``JarStore.begin_upload``).

    Bytes are appended to a temporary file ``.upload-*.part`` there (never listed as a program)
    and checked as they come: the whole must be UTF-8 text that is not only whitespace.
    ``commit`` renames the file to ``<32 hex>_<name>``; ``abort`` removes it. All methods block
    (file I/O) and are thread-safe; after ``commit`` or ``abort`` the upload is closed.

    Raises:
        UploadRejectedException: ``filename`` does not name a ``.py`` file.
    """

    def __init__(self, directory: Path, filename: str) -> None:
        self.name = _clean_name(filename)
        self._directory = directory
        fd, temp = tempfile.mkstemp(prefix=".upload-", suffix=".part", dir=directory)
        #: the temporary file (gone after ``commit`` or ``abort``)
        self.temp_path = Path(temp)
        self._file = os.fdopen(fd, "wb")
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._blank = True
        self._closed = False
        self._lock = threading.Lock()
        #: bytes written so far
        self.size = 0

    def write(self, data: bytes) -> None:
        """Append ``data``.

        Raises:
            UploadRejectedException: the bytes so far are not UTF-8 text.
            ValueError: the upload is closed.
        """
        with self._lock:
            if self._closed:
                raise ValueError(f"the upload of {self.name!r} is closed")
            try:
                self._decoder.decode(data)
            except UnicodeDecodeError:
                raise self._not_utf8() from None
            if self._blank and data.strip():
                self._blank = False
            self._file.write(data)
            self.size += len(data)

    def commit(self) -> StoredProgram:
        """Check the whole upload and store it under a new id; the upload is closed either way.

        Raises:
            UploadRejectedException: empty (only whitespace) or not UTF-8 text.
            ValueError: the upload is closed.
        """
        with self._lock:
            if self._closed:
                raise ValueError(f"the upload of {self.name!r} is closed")
            try:
                if self._blank:
                    raise UploadRejectedException(f"The uploaded program {self.name!r} is empty.")
                try:
                    self._decoder.decode(b"", final=True)
                except UnicodeDecodeError:
                    raise self._not_utf8() from None
                self._file.close()
                path = self._directory / f"{uuid.uuid4().hex}_{self.name}"
                os.replace(self.temp_path, path)
                self._closed = True
                return _describe(path)
            except BaseException:
                self._discard()
                raise

    def abort(self) -> None:
        """Remove the temporary file (nothing when the upload is already closed)."""
        with self._lock:
            if not self._closed:
                self._discard()

    def _discard(self) -> None:
        self._closed = True
        self._file.close()
        self.temp_path.unlink(missing_ok=True)

    def _not_utf8(self) -> UploadRejectedException:
        return UploadRejectedException(
            f"The uploaded program {self.name!r} is not UTF-8 text (upload the .py source).")


#: an upload's temporary file untouched this long (s) was left by a process that died mid-upload
#: (a live upload writes within ``rest.server.idle-timeout``, seconds)
STALE_UPLOAD_S = 3600.0


def remove_stale_uploads(directory: Path, now_s: float, max_age_s: float = STALE_UPLOAD_S
                         ) -> list[str]:
    """Delete the ``.upload-*.part`` files in ``directory`` last written more than
    ``max_age_s`` before ``now_s`` (epoch s); returns their names (blocking: file I/O)."""
    removed = []
    for path in directory.glob(".upload-*.part"):
        try:
            if now_s - path.stat().st_mtime > max_age_s:
                path.unlink()
                removed.append(path.name)
        except FileNotFoundError:  # finished or removed meanwhile
            continue
    return removed


class JarStore:
    """Uploaded programs in ``<upload_dir>/flintlock-web-upload`` (``None``: a temporary dir).

    A configured directory outlives the JobManager: the temporary files of uploads a process
    left when it died are removed when the directory is first used (``remove_stale_uploads``).
    """

    def __init__(self, upload_dir: str | None = None) -> None:
        self._configured = Path(upload_dir).expanduser() / "flintlock-web-upload" if upload_dir else None
        self._dir: Path | None = None
        self._lock = threading.Lock()

    def directory(self) -> Path:
        """The storage directory (created on first use)."""
        with self._lock:
            if self._dir is None:
                if self._configured is not None:
                    self._configured.mkdir(parents=True, exist_ok=True)
                    self._dir = self._configured
                    removed = remove_stale_uploads(self._dir, time.time())
                    if removed:
                        log.info("Removed %d interrupted upload(s) from %s: %s", len(removed),
                                 self._dir, ", ".join(sorted(removed)))
                else:
                    self._dir = Path(tempfile.mkdtemp(prefix="flintlock-web-upload-"))
                    weakref.finalize(self, shutil.rmtree, str(self._dir), True)
            return self._dir

    def begin_upload(self, filename: str) -> ProgramUpload:
        """Start storing an upload of ``filename`` piece by piece (blocking: file I/O).

        Raises:
            UploadRejectedException: ``filename`` does not name a ``.py`` file.
        """
        return ProgramUpload(self.directory(), filename)

    def save(self, filename: str, data: bytes) -> StoredProgram:
        """Store an upload under a new id (blocking: file I/O).

        Raises:
            UploadRejectedException: not a non-empty ``.py`` UTF-8 text file.
        """
        upload = self.begin_upload(filename)
        try:
            upload.write(data)
            return upload.commit()
        finally:
            upload.abort()

    def programs(self) -> list[StoredProgram]:
        """Stored programs, newest first (blocking)."""
        programs = []
        for path in self.directory().iterdir():
            if _ID.match(path.name) and path.is_file():
                try:
                    programs.append(_describe(path))
                except OSError:  # deleted meanwhile
                    continue
        programs.sort(key=lambda p: (p.uploaded_ms, p.id), reverse=True)
        return programs

    def get(self, jar_id: str) -> StoredProgram:
        """Raises ``JarNotFoundException`` for a malformed or unknown id."""
        if not isinstance(jar_id, str) or not _ID.match(jar_id):
            raise JarNotFoundException(
                f"Invalid jar id {jar_id[:100]!r}: expected '<32 hex>_<name>.py' as returned by "
                "POST /jars/upload and GET /jars.")
        path = self.directory() / jar_id
        if not path.is_file():
            raise JarNotFoundException(f"No uploaded program with id {jar_id!r}.")
        return _describe(path)

    def delete(self, jar_id: str) -> None:
        """Raises ``JarNotFoundException`` for a malformed or unknown id."""
        self.get(jar_id).path.unlink(missing_ok=True)
