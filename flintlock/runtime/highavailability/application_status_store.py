"""The final status of an application cluster's application, kept for its standby JobManagers.

With high availability an application cluster has several JobManagers: one leads and runs the
program's main() (``ApplicationDispatcherBootstrap``), the others stand by; a new leader runs
main() again, and the application's jobs keep their ids (``client.application.stable_job_id``),
so a job that already ran is not submitted twice. When the application has ended, the leader
records its status here before it exits: a standby that leads afterwards must not run main()
again (its side effects would happen twice, and its jobs would all be answered from the
JobResultStore), it exits with the recorded status. Flink ends the whole cluster at that point
(its standbys are replicas of one Kubernetes deployment, deleted with it).

The record is one JSON document, ``<high-availability.storageDir>/<cluster-id>/
application-status.json``::

    {"status": "SUCCEEDED" | "FAILED" | "CANCELED", "jobs": {"<job id>": "<status>", ...},
     "version": 1}

Works on any pyarrow filesystem (a local path or a URI); written to a temporary name and moved
into place, so a reader never sees half a record.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs

from flintlock.exceptions import FlintlockException
from flintlock.runtime.shuffle.layout import filesystem_and_path

__all__ = ["APPLICATION_STATUS_FILE", "ApplicationStatusStore", "RecordedApplicationStatus"]

APPLICATION_STATUS_FILE = "application-status.json"
_VERSION = 1
_STATUSES = ("SUCCEEDED", "FAILED", "CANCELED")


@dataclass(frozen=True)
class RecordedApplicationStatus:
    """How the application ended: ``status`` (SUCCEEDED, FAILED, CANCELED) and each job's."""

    status: str
    jobs: dict[str, str]


class ApplicationStatusStore:
    """Reads and writes the application's status in the cluster's HA directory.

    Args:
        directory: the cluster's HA directory (``HighAvailabilityServices.directory``).
    """

    def __init__(self, directory: str) -> None:
        self.uri = f"{directory.rstrip('/')}/{APPLICATION_STATUS_FILE}"
        self._fs, self._path = filesystem_and_path(self.uri)

    def write(self, status: str, jobs: dict[str, str]) -> None:
        """Record the application's end.

        Raises:
            ValueError: an unknown status.
            OSError: it cannot be written.
        """
        if status not in _STATUSES:
            raise ValueError(f"unknown application status {status!r}")
        parent = self._path.rsplit("/", 1)[0]
        self._fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/.{APPLICATION_STATUS_FILE}.{uuid.uuid4().hex[:8]}.tmp"
        with self._fs.open_output_stream(tmp) as out:
            out.write(json.dumps({"status": status, "jobs": jobs, "version": _VERSION}).encode())
        self._fs.move(tmp, self._path)

    def read(self) -> RecordedApplicationStatus | None:
        """The recorded status; None when the application has not ended.

        Raises:
            ApplicationStatusException: the record exists but cannot be read or parsed.
        """
        if self._fs.get_file_info(self._path).type != pafs.FileType.File:
            return None
        try:
            with self._fs.open_input_stream(self._path) as src:
                document = json.loads(src.read().decode())
            status, jobs = document["status"], document.get("jobs", {})
            if status not in _STATUSES or not isinstance(jobs, dict):
                raise ValueError(f"status {status!r}, jobs {type(jobs).__name__}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ApplicationStatusException(
                f"the application status record {self.uri} is unreadable ({exc}); delete it to "
                "run the application again") from None
        return RecordedApplicationStatus(status, {str(k): str(v) for k, v in jobs.items()})


class ApplicationStatusException(FlintlockException):
    """The application's status record cannot be read (the message names the file)."""
