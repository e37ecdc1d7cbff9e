"""Results of globally terminated jobs (Flink ``FileSystemJobResultStore``, FLIP-194).

When a job reaches FINISHED, FAILED or CANCELED, the Dispatcher writes a *dirty* entry
(``<dir>/<job id>_DIRTY.json``) before it cleans up the job's HA data (its stored JobGraph), and
marks the entry *clean* afterwards (renamed to ``<job id>.json``, or deleted with
``job-result-store.delete-on-commit``). A new leader does not run a job that has an entry: a
dirty one only gets its cleanup finished. The entry is Flink's JSON document::

    {"result": {"id": "<job id>", "application-status": "SUCCEEDED" | "FAILED" | "CANCELED",
                "accumulator-results": {}, "net-runtime": <ms>, "job-name": "<name>"},
     "version": 1}

Works on any pyarrow filesystem (a local path or a URI).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow.fs as pafs

from flintlock.exceptions import FlintlockException
from flintlock.runtime.ids import JobID
from flintlock.runtime.shuffle.layout import filesystem_and_path

__all__ = ["FileSystemJobResultStore", "JobResultEntry", "JobResultStoreException"]

DIRTY = "_DIRTY.json"
CLEAN = ".json"


class JobResultStoreException(FlintlockException):
    """An entry cannot be written, moved or read (the message names the file)."""


@dataclass(frozen=True)
class JobResultEntry:
    """What the store keeps of a job: its id, application status and net runtime (ms), plus
    (beyond Flink's document, for listing the job after a failover) its name, type, and start
    and end times (epoch ms; -1 unknown)."""

    job_id: JobID
    application_status: str
    net_runtime_ms: int = 0
    job_name: str = ""
    job_type: str = "BATCH"
    start_time_ms: int = -1
    end_time_ms: int = -1

    def to_json(self) -> str:
        return json.dumps({"result": {
            "id": str(self.job_id), "application-status": self.application_status,
            "accumulator-results": {}, "net-runtime": self.net_runtime_ms,
            "job-name": self.job_name, "job-type": self.job_type,
            "start-time": self.start_time_ms, "end-time": self.end_time_ms}, "version": 1})

    @classmethod
    def from_json(cls, text: str) -> JobResultEntry:
        """Raises: ValueError: not an entry document."""
        try:
            result = json.loads(text)["result"]
            return cls(JobID.from_hex(result["id"]), str(result["application-status"]),
                       int(result.get("net-runtime", 0)), str(result.get("job-name", "")),
                       str(result.get("job-type", "BATCH")), int(result.get("start-time", -1)),
                       int(result.get("end-time", -1)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a job result entry: {text[:200]!r}") from exc


class FileSystemJobResultStore:
    """See the module docstring.

    Args:
        uri: the store's directory (created when missing).
        delete_on_commit: delete clean entries instead of keeping ``<job id>.json``.
    """

    def __init__(self, uri: str, delete_on_commit: bool = False) -> None:
        self.uri = uri.rstrip("/")
        self.delete_on_commit = delete_on_commit
        self._fs, self._dir = filesystem_and_path(self.uri)
        self._fs.create_dir(self._dir, recursive=True)

    def _path(self, job_id: JobID, suffix: str) -> str:
        return f"{self._dir}/{job_id}{suffix}"

    def _exists(self, path: str) -> bool:
        return self._fs.get_file_info(path).type == pafs.FileType.File

    def create_dirty_result(self, entry: JobResultEntry) -> None:
        """Record ``entry`` as dirty (its job's cleanup is pending).

        Raises:
            JobResultStoreException: the job already has an entry, or it cannot be written.
        """
        if self.has_job_result_entry(entry.job_id):
            raise JobResultStoreException(f"job {entry.job_id} already has a result entry in "
                                          f"{self.uri}")
        tmp = f"{self._dir}/.{entry.job_id}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with self._fs.open_output_stream(tmp) as out:
                out.write(entry.to_json().encode())
            self._fs.move(tmp, self._path(entry.job_id, DIRTY))
        except OSError as exc:
            raise JobResultStoreException(
                f"cannot write the result of job {entry.job_id} to {self.uri}: {exc}") from exc

    def mark_result_as_clean(self, job_id: JobID) -> None:
        """The job's cleanup finished: its dirty entry becomes clean (or is deleted).

        Raises:
            JobResultStoreException: it has no dirty entry (and no clean one).
        """
        dirty = self._path(job_id, DIRTY)
        if not self._exists(dirty):
            if self._exists(self._path(job_id, CLEAN)):
                return  # already clean
            raise JobResultStoreException(f"job {job_id} has no dirty result entry in {self.uri}")
        if self.delete_on_commit:
            self._fs.delete_file(dirty)
        else:
            self._fs.move(dirty, self._path(job_id, CLEAN))

    def has_dirty_job_result_entry(self, job_id: JobID) -> bool:
        return self._exists(self._path(job_id, DIRTY))

    def has_clean_job_result_entry(self, job_id: JobID) -> bool:
        return self._exists(self._path(job_id, CLEAN))

    def has_job_result_entry(self, job_id: JobID) -> bool:
        return self.has_dirty_job_result_entry(job_id) or self.has_clean_job_result_entry(job_id)

    def get_dirty_results(self) -> list[JobResultEntry]:
        """The entries whose cleanup is pending (unreadable ones are skipped)."""
        return self._entries(lambda name: name.endswith(DIRTY))

    def get_clean_results(self) -> list[JobResultEntry]:
        """The entries of jobs whose cleanup finished (kept unless ``delete_on_commit``)."""
        return self._entries(lambda name: name.endswith(CLEAN) and not name.endswith(DIRTY))

    def _entries(self, wanted: Callable[[str], bool]) -> list[JobResultEntry]:
        entries = []
        for info in self._fs.get_file_info(pafs.FileSelector(self._dir, allow_not_found=True)):
            if info.type != pafs.FileType.File or not wanted(info.base_name):
                continue
            try:
                with self._fs.open_input_stream(info.path) as f:
                    entries.append(JobResultEntry.from_json(f.read().decode()))
            except (OSError, ValueError, UnicodeDecodeError):
                continue
        return sorted(entries, key=lambda e: str(e.job_id))
