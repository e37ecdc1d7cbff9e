"""``JarStore``: the programs uploaded for web submission (Flink's ``web.upload.dir`` jars).

flintlock "jars" are Python program files (``.py``). Each upload is stored as
``<32 hex>_<name>.py`` (Flink's ``<uuid>_<name>.jar``) in ``<web.upload.dir>/flintlock-web-upload``,
or in a temporary directory removed when the store is garbage-collected or the process exits.
A jar id is that file name; ids and names are validated, so no request path reaches the file
system unchecked.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

from flintlock.exceptions import FlintlockException

__all__ = ["JarNotFoundException", "JarStore", "StoredProgram", "UploadRejectedException"]

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


class JarStore:
    """Uploaded programs in ``<upload_dir>/flintlock-web-upload`` (``None``: a temporary dir)."""

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
                else:
                    self._dir = Path(tempfile.mkdtemp(prefix="flintlock-web-upload-"))
                    weakref.finalize(self, shutil.rmtree, str(self._dir), True)
            return self._dir

    def save(self, filename: str, data: bytes) -> StoredProgram:
        """Store an upload under a new id (blocking: file I/O).

        Raises:
            UploadRejectedException: not a non-empty ``.py`` UTF-8 text file.
        """
        name = _clean_name(filename)
        if not data.strip():
            raise UploadRejectedException(f"The uploaded program {name!r} is empty.")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise UploadRejectedException(
                f"The uploaded program {name!r} is not UTF-8 text (upload the .py source).") from None
        path = self.directory() / f"{uuid.uuid4().hex}_{name}"
        path.write_bytes(data)
        return self._describe(path)

    @staticmethod
    def _describe(path: Path) -> StoredProgram:
        return StoredProgram(path.name, path.name.split("_", 1)[1], path,
                             int(path.stat().st_mtime * 1000))

    def programs(self) -> list[StoredProgram]:
        """Stored programs, newest first (blocking)."""
        programs = []
        for path in self.directory().iterdir():
            if _ID.match(path.name) and path.is_file():
                try:
                    programs.append(self._describe(path))
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
        return self._describe(path)

    def delete(self, jar_id: str) -> None:
        """Raises ``JarNotFoundException`` for a malformed or unknown id."""
        self.get(jar_id).path.unlink(missing_ok=True)
