"""Checkpoint storage on a filesystem (Flink ``FsCheckpointStorageAccess`` / ``Checkpoints``).

Layout under ``state.checkpoints.dir``::

    <dir>/<job id>/chk-<n>/_metadata                    the CompletedCheckpoint (JSON)
    <dir>/<job id>/chk-<n>/<vertex id>/<subtask>/<node>/ an operator's state table (Parquet)

``_metadata`` is written last and atomically (a rename), so a directory without it is an
unfinished or aborted checkpoint, never a completed one. Pure ``pyarrow.fs``: local paths and
URIs (``s3://``, ``hdfs://``) alike.
"""

from __future__ import annotations

import logging
import os
import uuid

import pyarrow.fs as pafs

from flintlock.runtime.checkpoint.snapshots import CheckpointMetadataException, CompletedCheckpoint
from flintlock.runtime.shuffle.layout import filesystem_and_path, probe_writable

__all__ = [
    "METADATA_FILE",
    "check_writable",
    "discard",
    "latest_checkpoint",
    "read_checkpoint",
    "write_metadata",
]

METADATA_FILE = "_metadata"

log = logging.getLogger(__name__)


def check_writable(directory: str) -> None:
    """Create ``directory`` and a probe file in it, so an unusable ``state.checkpoints.dir``
    fails the job at its start (Flink checks at submission).

    Raises:
        OSError: naming the directory and the cause.
    """
    try:
        probe_writable(directory)
    except (OSError, ValueError) as exc:
        raise OSError(f"the checkpoint directory {directory!r} is not writable: {exc} "
                      "(set state.checkpoints.dir to a writable directory)") from exc


def write_metadata(checkpoint: CompletedCheckpoint) -> str:
    """Write ``checkpoint``'s ``_metadata`` atomically; returns its path."""
    fs, path = filesystem_and_path(checkpoint.external_pointer)
    fs.create_dir(path, recursive=True)
    target = f"{path}/{METADATA_FILE}"
    tmp = f"{path}/.{METADATA_FILE}.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(tmp) as out:
        out.write(checkpoint.to_json().encode())
    fs.move(tmp, target)
    return target


def read_checkpoint(pointer: str) -> CompletedCheckpoint:
    """The checkpoint or savepoint at ``pointer`` (its directory or its ``_metadata`` file).

    Raises:
        FileNotFoundError: nothing there, or a directory without ``_metadata`` (names it).
        CheckpointMetadataException: the ``_metadata`` file is corrupt.
    """
    fs, path = filesystem_and_path(pointer.rstrip("/"))
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"no checkpoint or savepoint at {pointer!r}: the path does not "
                                "exist")
    if info.type == pafs.FileType.Directory:
        path = f"{path}/{METADATA_FILE}"
        if fs.get_file_info(path).type != pafs.FileType.File:
            raise FileNotFoundError(f"{pointer!r} holds no {METADATA_FILE} file: not a completed "
                                    "checkpoint or savepoint")
    with fs.open_input_stream(path) as fh:
        text = bytes(fh.read()).decode(errors="replace")
    return CompletedCheckpoint.from_json(text, where=os.path.basename(path) + f" in {pointer!r}")


def latest_checkpoint(job_directory: str) -> CompletedCheckpoint | None:
    """The newest completed checkpoint under ``job_directory`` (``<dir>/<job id>``): the
    highest ``chk-<n>`` with a readable ``_metadata``; one that cannot be read is skipped with
    a warning (an older one is used). None when there is none, as for a new job. A JobMaster
    that takes over a job (high availability) restores from it (Flink's
    ``CompletedCheckpointStore`` after a JobManager failover)."""
    fs, path = filesystem_and_path(job_directory.rstrip("/"))
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    numbered = []
    for info in infos:
        name = info.base_name
        if info.type == pafs.FileType.Directory and name.startswith("chk-") and name[4:].isdigit():
            numbered.append((int(name[4:]), f"{job_directory.rstrip('/')}/{name}"))
    for n, location in sorted(numbered, reverse=True):
        try:
            return read_checkpoint(location)
        except FileNotFoundError:
            continue  # not completed (no _metadata yet)
        except (OSError, CheckpointMetadataException) as exc:
            log.warning("checkpoint %d at %s cannot be read, trying an older one: %s", n,
                        location, exc)
    return None


def discard(location: str) -> None:
    """Delete a checkpoint directory (nothing when it is gone)."""
    fs, path = filesystem_and_path(location)
    try:
        fs.delete_dir(path)
    except FileNotFoundError:
        pass

