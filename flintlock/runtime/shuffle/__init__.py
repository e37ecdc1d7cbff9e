"""BLOCKING result partitions: layout, statistics, release (pure; Spark I/O is in ``runtime.spark``)."""

from __future__ import annotations

from flintlock.runtime.shuffle.exceptions import PartitionNotFoundException
from flintlock.runtime.shuffle.layout import (
    SUBPARTITION_COLUMN,
    missing_paths,
    partition_stats,
    partition_uri,
    release_partitions,
    subpartition_uri,
)

__all__ = [
    "SUBPARTITION_COLUMN",
    "PartitionNotFoundException",
    "missing_paths",
    "partition_stats",
    "partition_uri",
    "release_partitions",
    "subpartition_uri",
]
