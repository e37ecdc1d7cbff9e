"""File source and two-phase file sink (Parquet, CSV, JSON, text) on ``pyarrow.fs``.

- ``FileSource`` enumerates files on the JobMaster (local paths and URIs; a file, a directory
  read recursively, or a glob) and assigns them to subtasks balancing bytes (greedy, largest file
  first; Flink's FileSource split assigner). The Task reads its files with Spark.
- ``FileSink`` is two-phase (Flink's ``FileSink`` with ``TwoPhaseCommittingSink``): every attempt
  writes into ``<path>/_temporary/<job_id>/<attempt>/`` with Spark; the JobMaster's ``commit`` moves
  the finished attempts' part files to ``<path>/part-<subtask:05d>-<n:03d>.<ext>`` (pure pyarrow.fs)
  and removes ``_temporary``; ``abort`` deletes the job's temporary directory.

Hidden files (names starting with ``_`` or ``.``, as Spark skips them) are neither read nor counted
as data.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import heapq
import logging
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from flintlock.connectors.exceptions import SinkException, SourceException

__all__ = ["FileSink", "FileSource", "FileSplit", "MonitoredFilesSplit", "assign_balanced"]

log = logging.getLogger(__name__)

_GLOB_CHARS = set("*?[")
_EXTENSIONS = {"parquet": "parquet", "csv": "csv", "json": "json", "text": "txt"}


def _fs_path(uri: str) -> tuple[pafs.FileSystem, str, str]:
    """(filesystem, path inside it, prefix to turn a path back into a URI for Spark)."""
    if "://" in uri and not uri.startswith("file://"):
        fs, path = pafs.FileSystem.from_uri(uri)
        scheme_len = uri.index("://") + 3
        at = uri.find(path.rstrip("/"), scheme_len) if path else -1
        prefix = uri[:at] if at >= 0 else uri[:scheme_len]
        return fs, path.rstrip("/"), prefix
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(path)), ""


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


@dataclass(frozen=True)
class MonitoredFilesSplit:
    """Subtask ``subtask`` of ``parallelism`` reads the monitored path's files hashed to it."""

    subtask: int
    parallelism: int


@dataclass(frozen=True)
class FileSplit:
    """One file to read: ``path`` (as Spark should see it) and its ``size`` in bytes."""

    path: str
    size: int


def assign_balanced(splits: Sequence[FileSplit], parallelism: int) -> list[list[Any]]:
    """Greedy largest-first assignment to the subtask with the fewest bytes (ties: lowest index)."""
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    out: list[list[Any]] = [[] for _ in range(parallelism)]
    heap = [(0, i) for i in range(parallelism)]
    for split in sorted(splits, key=lambda s: (-s.size, s.path)):
        load, i = heapq.heappop(heap)
        out[i].append(split)
        heapq.heappush(heap, (load + split.size, i))
    return out


@dataclass
class FileSource:
    """Files in one format under ``path`` (file, directory or glob; local path or URI).

    Use the constructors ``parquet``, ``csv``, ``json``, ``text``.
    """

    format: str
    path: str
    schema: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    #: set by ``monitor_continuously``: how often (ms) the path is listed for new files
    discovery_interval_ms: int | None = None
    #: the listing ``infer_parallelism`` made, taken by the next ``enumerate_splits`` (the
    #: JobMaster asks both when a job starts: one LIST of the path, not two)
    _listing: list[FileSplit] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def parquet(cls, path: str, schema: str | None = None) -> FileSource:
        return cls("parquet", str(path), schema)

    @classmethod
    def csv(cls, path: str, schema: str | None = None, header: bool = True, **options: Any) -> FileSource:
        opts = {"header": str(bool(header)).lower(), **{k: str(v) for k, v in options.items()}}
        return cls("csv", str(path), schema, opts)

    @classmethod
    def json(cls, path: str, schema: str | None = None) -> FileSource:
        return cls("json", str(path), schema)

    @classmethod
    def text(cls, path: str) -> FileSource:
        return cls("text", str(path), "value string")

    def monitor_continuously(self, interval: Any) -> FileSource:
        """An unbounded source: the path is listed every ``interval`` (ms or ``timedelta``) and
        each new file is read once (Flink ``FileSource.monitorContinuously``).

        Files are assigned to subtasks by a hash of their path. Writers should create a file
        under a hidden name (``.name`` or ``_name``, never read) and rename it when complete.

        Raises:
            TypeError, ValueError: not a duration of at least 1 ms.
        """
        from flintlock.api.durations import to_millis

        return dataclasses.replace(self, discovery_interval_ms=to_millis("interval", interval, 1))

    @property
    def bounded(self) -> bool:
        return self.discovery_interval_ms is None

    def describe(self) -> str:
        if self.discovery_interval_ms is not None:
            return (f"{self.format.capitalize()} Source: {self.path} "
                    f"(monitored every {self.discovery_interval_ms} ms)")
        return f"{self.format.capitalize()} Source: {self.path}"

    def output_schema(self) -> str | None:
        return self.schema

    def list_files(self) -> list[FileSplit]:
        """All data files under ``path``, one ``FileSplit`` each.

        Raises:
            SourceException: the path does not exist, matches nothing, or cannot be listed.
        """
        try:
            fs, path, prefix = _fs_path(self.path)
            if any(c in _GLOB_CHARS for c in path):
                return self._glob(fs, path, prefix)
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound:
                raise self._missing()
            if info.type == pafs.FileType.File:
                return [FileSplit(prefix + info.path, info.size or 0)]
            return self._walk(fs, path, prefix)
        except SourceException:
            raise
        except (OSError, ValueError) as exc:
            raise SourceException(f"{self.describe()}: cannot list {self.path!r}: {exc}") from exc

    def _missing(self) -> SourceException:
        """The error for a path that does not exist; a relative local path names the working
        directory it was resolved against (that of the process listing it: the client, or the
        JobManager of a cluster)."""
        where = ""
        if "://" not in self.path and not os.path.isabs(os.path.expanduser(self.path)):
            where = (f" (a relative path, resolved against {os.getcwd()!r}, the working "
                     "directory of this process; on a cluster, give an absolute path)")
        return SourceException(f"{self.describe()}: path {self.path!r} does not exist{where}")

    def _walk(self, fs: pafs.FileSystem, root: str, prefix: str) -> list[FileSplit]:
        out = []
        for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
            rel = info.path[len(root):].lstrip("/")
            if info.type != pafs.FileType.File or any(_hidden(p) for p in rel.split("/")):
                continue
            out.append(FileSplit(prefix + info.path, info.size or 0))
        return sorted(out, key=lambda s: s.path)

    def _glob(self, fs: pafs.FileSystem, pattern: str, prefix: str) -> list[FileSplit]:
        parts = pattern.split("/")
        first = next(i for i, p in enumerate(parts) if any(c in _GLOB_CHARS for c in p))
        base = "/".join(parts[:first]) or "/"
        if fs.get_file_info(base).type == pafs.FileType.NotFound:
            raise self._missing()
        out = []
        depth = len(parts)
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True)):
            segs = info.path.split("/")
            if len(segs) < depth or not fnmatch.fnmatchcase("/".join(segs[:depth]), pattern):
                continue
            rel = segs[depth:]
            if info.type == pafs.FileType.File and not any(_hidden(p) for p in [segs[depth - 1], *rel]):
                out.append(FileSplit(prefix + info.path, info.size or 0))
        if not out:
            raise SourceException(f"{self.describe()}: no files match {self.path!r}")
        return sorted(set(out), key=lambda s: s.path)

    def infer_parallelism(self, upper_bound: int, data_volume_per_task: int) -> int:
        """The subtasks a bounded read needs: ``ceil(bytes of the files / data_volume_per_task)``
        within ``[1, min(upper_bound, number of files)]`` (a file is one split). Flink's
        ``DynamicParallelismInference.inferParallelism``, asked by the AdaptiveBatchScheduler
        for a source whose parallelism the program did not set. A monitored source: the bound.

        Raises:
            SourceException: the path is missing or cannot be listed.
        """
        if self.discovery_interval_ms is not None:
            return max(1, upper_bound)
        files = self._listing = self.list_files()
        wanted = -(-sum(f.size for f in files) // max(1, data_volume_per_task))
        return max(1, min(wanted, upper_bound, len(files)))

    def enumerate_splits(self, parallelism: int) -> list[list[Any]]:
        """One split per file, balanced by bytes over ``parallelism`` subtasks (some may get none).

        A monitored source gets one ``MonitoredFilesSplit`` per subtask instead (its subtask
        lists the path itself); the path must exist, it may be empty.
        """
        if self.discovery_interval_ms is not None:
            self.new_files(set(), 0, 1)
            return [[MonitoredFilesSplit(i, parallelism)] for i in range(parallelism)]
        files, self._listing = self._listing, None
        return assign_balanced(self.list_files() if files is None else files, parallelism)

    def new_files(self, seen: set[str], subtask: int, parallelism: int) -> list[FileSplit]:
        """The files under the path not in ``seen`` that belong to ``subtask`` (crc32 of the
        path modulo ``parallelism``), sorted by path.

        Raises:
            SourceException: the path no longer exists or cannot be listed.
        """
        try:
            files = self.list_files()
        except SourceException as exc:
            if "no files match" in str(exc):  # a glob matching nothing yet
                return []
            raise
        return [f for f in files if f.path not in seen
                and zlib.crc32(f.path.encode()) % parallelism == subtask]


@dataclass
class FileSink:
    """Two-phase file sink; use the constructors ``parquet``, ``csv``, ``json``.

    Args:
        format: ``parquet``, ``csv`` or ``json`` (Spark writer format).
        path: the output directory (local path or URI).
        mode: ``"error"`` (the directory must not hold data) or ``"overwrite"`` (old data files
            are deleted at commit).
        options: Spark writer options.
    """

    format: str
    path: str
    mode: str = "error"
    options: dict[str, str] = field(default_factory=dict)

    #: each attempt writes under its own temporary directory; ``commit`` publishes the finished
    #: attempts' and removes the rest (speculative execution may run subtasks twice)
    supports_concurrent_execution_attempts = True

    def __post_init__(self) -> None:
        if self.mode not in ("error", "overwrite"):
            raise ValueError(f"FileSink mode must be 'error' or 'overwrite', got {self.mode!r}")

    @classmethod
    def parquet(cls, path: str, mode: str = "error") -> FileSink:
        return cls("parquet", str(path), mode)

    @classmethod
    def csv(cls, path: str, header: bool = True, mode: str = "error") -> FileSink:
        return cls("csv", str(path), mode, {"header": str(bool(header)).lower()})

    @classmethod
    def json(cls, path: str, mode: str = "error") -> FileSink:
        return cls("json", str(path), mode)

    def describe(self) -> str:
        return f"{self.format.capitalize()} Sink: {self.path}"

    # ---- paths -------------------------------------------------------------------------------

    def _root(self) -> tuple[pafs.FileSystem, str, str]:
        return _fs_path(self.path)

    def temporary_dir(self, job_id: str, attempt: str) -> str:
        """Where attempt ``attempt`` of job ``job_id`` writes (a path/URI Spark can write to)."""
        _, path, prefix = self._root()
        return f"{prefix}{path}/_temporary/{job_id}/{attempt}"

    def _job_tmp(self, job_id: str) -> tuple[pafs.FileSystem, str]:
        fs, path, _ = self._root()
        return fs, f"{path}/_temporary/{job_id}"

    def _data_entries(self, fs: pafs.FileSystem, root: str) -> list[pafs.FileInfo]:
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            return []
        if info.type == pafs.FileType.File:
            raise SinkException(f"{self.describe()}: {self.path!r} is a file, not a directory")
        return [
            e for e in fs.get_file_info(pafs.FileSelector(root, recursive=False))
            if not _hidden(e.base_name)
        ]

    # ---- two-phase protocol -------------------------------------------------------------------

    def prepare(self, job_id: str) -> None:
        """Fail fast if the target holds data and ``mode == "error"``.

        A run of the same job that was publishing when it stopped (its ``_COMMITTING`` marker
        is still there: a JobManager leader died mid-commit, and the new leader runs the job
        again) left part of its output in the target. Every data file there is that run's
        (the target was empty, or cleared by ``overwrite``), so it is removed first: the new
        run publishes the whole output once.

        Raises:
            SinkException: naming the path.
        """
        try:
            fs, root, _ = self._root()
            self._roll_back_interrupted_commit(fs, root, job_id)
            entries = self._data_entries(fs, root)
        except SinkException:
            raise
        except (OSError, ValueError) as exc:
            raise SinkException(f"{self.describe()}: cannot access {self.path!r}: {exc}") from exc
        if entries and self.mode == "error":
            raise SinkException(
                f"{self.describe()}: output path {self.path!r} already holds data "
                f"(mode='error'; use mode='overwrite' to replace it)"
            )

    def committable_present(self, committable: object) -> bool:
        """Whether an attempt's staged output (``committable``, its directory) is still there
        to publish (batch job recovery keeps a finished sink subtask only then)."""
        try:
            fs, path, _ = _fs_path(str(committable))
            return fs.get_file_info(path).type == pafs.FileType.Directory
        except (OSError, ValueError):
            return False

    def _roll_back_interrupted_commit(self, fs: pafs.FileSystem, root: str, job_id: str) -> None:
        _, job_tmp = self._job_tmp(job_id)
        if fs.get_file_info(f"{job_tmp}/_COMMITTING").type == pafs.FileType.NotFound:
            return
        log.warning("%s: an earlier run of job %s stopped while publishing; its partial output "
                    "is removed before the job runs again", self.describe(), job_id)
        for entry in self._data_entries(fs, root):
            if entry.type == pafs.FileType.Directory:
                fs.delete_dir(entry.path)
            else:
                fs.delete_file(entry.path)
        self._remove_temporary(fs, job_tmp)

    def commit(self, job_id: str, committables: Sequence[Any]) -> None:
        """Publish the attempts' part files (``committables[i]`` = subtask i's directory).

        Idempotent: a commit that already happened (no temporary directory left) does nothing;
        a commit interrupted half-way resumes where it stopped. The ``_COMMITTING`` marker stays
        until ``release``: a JobManager that dies after publishing but before the job's result
        is recorded leaves it, and the next leader's run of the job rolls the output back and
        publishes it once more instead of failing on "already holds data".
        """
        fs, root, _ = self._root()
        fs_job, job_tmp = self._job_tmp(job_id)
        if fs.get_file_info(job_tmp).type == pafs.FileType.NotFound:
            return
        self._start_committing(fs, root, job_tmp)
        ext = _EXTENSIONS.get(self.format, self.format)
        for subtask, committable in enumerate(committables):
            if committable is None:
                continue
            _, src_dir, _ = _fs_path(str(committable))
            if fs.get_file_info(src_dir).type == pafs.FileType.NotFound:
                continue
            files = sorted(
                (e for e in fs.get_file_info(pafs.FileSelector(src_dir, recursive=True))
                 if e.type == pafs.FileType.File and not _hidden(e.base_name)),
                key=lambda e: e.path,
            )
            for entry in files:  # Spark's names are unique: a resumed commit adds, never replaces
                name = entry.base_name[5:] if entry.base_name.startswith("part-") else \
                    entry.base_name
                if not name.endswith(f".{ext}"):
                    name = f"{name}.{ext}"
                fs.move(entry.path, f"{root}/part-{subtask:05d}-{name}")
            fs.delete_dir(src_dir)

    def release(self, job_id: str) -> None:
        """The job's result is recorded (the Dispatcher calls this after its JobResultStore
        entry): remove its temporary directory and the ``_COMMITTING`` marker. Idempotent."""
        fs, job_tmp = self._job_tmp(job_id)
        self._remove_temporary(fs, job_tmp)

    def _start_committing(self, fs: pafs.FileSystem, root: str, job_tmp: str) -> None:
        """Before the job's first publication: ``overwrite`` clears the target once (the
        ``_COMMITTING`` marker remembers it happened)."""
        marker = f"{job_tmp}/_COMMITTING"
        if fs.get_file_info(marker).type != pafs.FileType.NotFound:
            return
        if self.mode == "overwrite":
            for entry in self._data_entries(fs, root):
                if entry.type == pafs.FileType.Directory:
                    fs.delete_dir(entry.path)
                else:
                    fs.delete_file(entry.path)
        fs.create_dir(job_tmp, recursive=True)
        with fs.open_output_stream(marker) as fh:
            fh.write(b"")

    def commit_transactions(self, job_id: str, transactions: Sequence[tuple[int, str]]) -> int:
        """Publish the part files a checkpoint pre-committed (Flink ``FileCommitter``):
        ``transactions`` = (subtask index, directory of finished part files) pairs. Each file
        keeps its unique Spark name, prefixed with the subtask (``part-<subtask>-<name>``).

        Idempotent: a directory already published (gone) is skipped, one published half-way
        resumes. Returns the number of files published.
        """
        fs, root, _ = self._root()
        _, job_tmp = self._job_tmp(job_id)
        moved = 0
        for subtask, directory in transactions:
            _, src_dir, _ = _fs_path(str(directory))
            if fs.get_file_info(src_dir).type == pafs.FileType.NotFound:
                continue
            self._start_committing(fs, root, job_tmp)
            for entry in sorted(fs.get_file_info(pafs.FileSelector(src_dir, recursive=True)),
                                key=lambda e: e.path):
                if entry.type != pafs.FileType.File or _hidden(entry.base_name):
                    continue
                name = entry.base_name[5:] if entry.base_name.startswith("part-") else \
                    entry.base_name
                fs.move(entry.path, f"{root}/part-{subtask:05d}-{name}")
                moved += 1
            fs.delete_dir(src_dir)
        return moved

    def abort(self, job_id: str, committables: Sequence[Any]) -> None:
        """Delete everything the job's attempts wrote; the target stays as it was."""
        fs, job_tmp = self._job_tmp(job_id)
        self._remove_temporary(fs, job_tmp)
        _, root, _ = self._root()
        try:
            if fs.get_file_info(root).type == pafs.FileType.Directory and not fs.get_file_info(
                pafs.FileSelector(root)
            ):
                fs.delete_dir(root)  # only the (empty) directory the job's attempts created
        except OSError:
            pass

    def _remove_temporary(self, fs: pafs.FileSystem, job_tmp: str) -> None:
        if fs.get_file_info(job_tmp).type != pafs.FileType.NotFound:
            fs.delete_dir(job_tmp)
        parent = job_tmp.rsplit("/", 1)[0]
        try:
            if fs.get_file_info(parent).type == pafs.FileType.Directory and not fs.get_file_info(
                pafs.FileSelector(parent)
            ):
                fs.delete_dir(parent)
        except OSError:
            pass
