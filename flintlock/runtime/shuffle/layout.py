"""Where BLOCKING result partitions live and what they hold (pure ``pyarrow.fs``, no Spark).

Layout (ARCHITECTURE section 4)::

    <shuffle_dir>/<job_id>/<dataset_id>/<partition_number>-<attempt_number>-<nonce>/sp=<k>/*.parquet

Subpartition ``k`` of a partition is the directory ``sp=<k>`` (written by Spark's
``partitionBy("sp")``); an empty subpartition has no directory. ``shuffle_dir`` may be a local path
or a filesystem URI that ``pyarrow.fs.FileSystem.from_uri`` understands.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flintlock.runtime.ids import ExecutionAttemptID, IntermediateResultPartitionID, JobID

__all__ = [
    "SUBPARTITION_COLUMN",
    "filesystem_and_path",
    "missing_paths",
    "probe_writable",
    "partition_stats",
    "partition_uri",
    "release_partitions",
    "subpartition_uri",
]

log = logging.getLogger(__name__)

#: The column Spark's ``partitionBy`` turns into ``sp=<k>`` directories.
SUBPARTITION_COLUMN = "sp"


def partition_uri(
    shuffle_dir: str,
    job_id: JobID,
    partition_id: IntermediateResultPartitionID,
    attempt_id: ExecutionAttemptID,
) -> str:
    """The directory of one attempt's partition (no trailing slash)."""
    base = shuffle_dir.rstrip("/")
    leaf = f"{partition_id.partition_number}-{attempt_id.attempt_number}-{attempt_id.nonce or 'x'}"
    return f"{base}/{job_id}/{partition_id.dataset_id}/{leaf}"


def subpartition_uri(uri: str, index: int) -> str:
    return f"{uri.rstrip('/')}/{SUBPARTITION_COLUMN}={index}"


def filesystem_and_path(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path inside it for a local path or URI."""
    if "://" in uri and not uri.startswith("file://"):
        return pafs.FileSystem.from_uri(uri)
    path = uri[len("file://"):] if uri.startswith("file://") else uri
    return pafs.LocalFileSystem(), os.path.abspath(path)


def probe_writable(uri: str) -> None:
    """Create directory ``uri`` (a local path or URI) and write, then delete, a probe file in
    it.

    Raises:
        OSError, ValueError: it cannot be written (or the URI is not understood).
    """
    fs, path = filesystem_and_path(uri)
    fs.create_dir(path, recursive=True)
    probe = f"{path}/.probe-{uuid.uuid4().hex}"
    with fs.open_output_stream(probe) as out:
        out.write(b"")
    fs.delete_file(probe)


def missing_paths(uris: Iterable[str]) -> list[str]:
    """Those of ``uris`` that do not exist (one metadata call per path)."""
    missing = []
    for uri in uris:
        fs, path = filesystem_and_path(uri)
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            missing.append(uri)
    return missing


def partition_stats(uri: str, number_of_subpartitions: int) -> tuple[list[int], list[int], str | None]:
    """Rows and bytes per subpartition from the Parquet footers (metadata only, no data).

    Returns:
        ``(rows, bytes, spark_schema_json)``: lists of length ``number_of_subpartitions``; the
        Spark schema JSON Spark stores in the footer (``None`` when nothing was written).
    """
    fs, root = filesystem_and_path(uri)
    rows = [0] * number_of_subpartitions
    sizes = [0] * number_of_subpartitions
    schema_json: str | None = None
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    for info in infos:
        if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
            continue
        parent = info.path[: -len(info.base_name) - 1].rsplit("/", 1)[-1]
        if not parent.startswith(f"{SUBPARTITION_COLUMN}="):
            continue
        k = int(parent.split("=", 1)[1])
        with fs.open_input_file(info.path) as fh:
            meta = pq.read_metadata(fh)
        rows[k] += meta.num_rows
        sizes[k] += info.size
        if schema_json is None and meta.metadata:
            raw = meta.metadata.get(b"org.apache.spark.sql.parquet.row.metadata")
            if raw:
                schema_json = raw.decode()
    return rows, sizes, schema_json


def release_partitions(paths: Iterable[str]) -> None:
    """Delete partition directories; missing ones are ignored."""
    for uri in paths:
        fs, path = filesystem_and_path(uri)
        try:
            fs.delete_dir(path)
        except FileNotFoundError:
            pass
        except OSError:
            if fs.get_file_info(path).type != pafs.FileType.NotFound:
                log.warning("could not release partition %s", uri, exc_info=True)
