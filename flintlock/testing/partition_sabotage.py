"""Damage stored result partitions on purpose: delete or truncate their files before a consumer
reads them, so tests can check that a data consumption error re-runs the producer's region.

Follows the layout of ``flintlock.runtime.shuffle.layout``::

    <shuffle_dir>/<job_id>/<dataset_id>/<partition_number>-<attempt_number>-<nonce>/sp=<k>/*.parquet

``shuffle_dir`` is a TaskManager's ``"shuffle_dir"`` service (``MiniCluster.services``) or the
configured ``shuffle.storage-dir``; local paths and ``pyarrow.fs`` URIs both work.
"""

from __future__ import annotations

import pyarrow.fs as pafs

from flintlock.runtime.ids import IntermediateDataSetID, JobID
from flintlock.runtime.shuffle.layout import filesystem_and_path

__all__ = ["delete_partition", "partition_dirs", "truncate_partition"]


def partition_dirs(shuffle_dir: str, job_id: JobID | str, dataset_id: IntermediateDataSetID | str,
                   partition_number: int | None = None) -> list[str]:
    """The stored partition directories of one dataset (of one producer subtask when
    ``partition_number`` is given), every attempt, sorted; paths inside the filesystem."""
    fs, root = filesystem_and_path(f"{shuffle_dir.rstrip('/')}/{job_id}/{dataset_id}")
    infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True))
    prefix = f"{partition_number}-" if partition_number is not None else ""
    return sorted(i.path for i in infos
                  if i.type == pafs.FileType.Directory and i.base_name.startswith(prefix))


def _files(fs: pafs.FileSystem, directory: str) -> list[pafs.FileInfo]:
    infos = fs.get_file_info(pafs.FileSelector(directory, recursive=True, allow_not_found=True))
    return [i for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")]


def delete_partition(shuffle_dir: str, job_id: JobID | str, dataset_id: IntermediateDataSetID | str,
                     partition_number: int) -> list[str]:
    """Delete every stored attempt of one producer subtask's partition; returns the directories.

    Raises:
        FileNotFoundError: nothing is stored for that partition (wrong ids, or not written yet).
    """
    fs, _ = filesystem_and_path(shuffle_dir)
    dirs = partition_dirs(shuffle_dir, job_id, dataset_id, partition_number)
    if not dirs:
        raise FileNotFoundError(
            f"no stored partition {partition_number} of dataset {dataset_id} (job {job_id}) under "
            f"{shuffle_dir}"
        )
    for d in dirs:
        fs.delete_dir(d)
    return dirs


def truncate_partition(shuffle_dir: str, job_id: JobID | str, dataset_id: IntermediateDataSetID | str,
                       partition_number: int, keep_fraction: float = 0.5) -> list[str]:
    """Cut every Parquet file of one producer subtask's partition to ``keep_fraction`` of its
    bytes (its footer is lost: the file is unreadable); returns the files.

    Raises:
        FileNotFoundError: no Parquet file is stored for that partition.
        ValueError: ``keep_fraction`` outside ``[0, 1)``.
    """
    if not 0 <= keep_fraction < 1:
        raise ValueError(f"keep_fraction must be in [0, 1), got {keep_fraction}")
    fs, _ = filesystem_and_path(shuffle_dir)
    files = [f for d in partition_dirs(shuffle_dir, job_id, dataset_id, partition_number)
             for f in _files(fs, d)]
    if not files:
        raise FileNotFoundError(
            f"no Parquet files of partition {partition_number} of dataset {dataset_id} (job "
            f"{job_id}) under {shuffle_dir}"
        )
    for info in files:
        with fs.open_input_file(info.path) as fh:
            head = fh.read(int(info.size * keep_fraction))
        with fs.open_output_stream(info.path) as out:
            out.write(head)
    return sorted(f.path for f in files)
