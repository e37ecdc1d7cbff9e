"""Configuration of the AdaptiveBatchScheduler (fact sheet 7.4; Flink ``BatchExecutionOptions``).

Registered in ``OPTIONS`` when ``flintlock.config.options`` is imported. Keys, defaults and the old
``jobmanager.adaptive-batch-scheduler.*`` keys follow Flink's ``BatchExecutionOptions``.
"""

from __future__ import annotations

from flintlock.config.options import _at_least, _bool, option, parse_memory_bytes, pos_int

__all__ = [
    "AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK",
    "AUTO_PARALLELISM_DEFAULT_SOURCE_PARALLELISM",
    "AUTO_PARALLELISM_ENABLED",
    "AUTO_PARALLELISM_MAX",
    "AUTO_PARALLELISM_MIN",
]

_PREFIX = "execution.batch.adaptive.auto-parallelism."
_OLD = "jobmanager.adaptive-batch-scheduler."

AUTO_PARALLELISM_ENABLED = option(
    _PREFIX + "enabled", True, _bool,
    "The AdaptiveBatchScheduler decides the parallelism of job vertices whose parallelism the "
    "program did not set, from the bytes their inputs produced.")
AUTO_PARALLELISM_MIN = option(
    _PREFIX + "min-parallelism", 1, pos_int,
    "Lower bound of an automatically decided parallelism.",
    deprecated_keys=(_OLD + "min-parallelism",))
AUTO_PARALLELISM_MAX = option(
    _PREFIX + "max-parallelism", None, pos_int,
    "Upper bound of an automatically decided parallelism; unset: the job's parallelism "
    "(parallelism.default, -p or env.set_parallelism). Producers write this many "
    "subpartitions for an automatically sized consumer.",
    deprecated_keys=(_OLD + "max-parallelism",))
AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK = option(
    _PREFIX + "avg-data-volume-per-task", 16 << 20, _at_least(parse_memory_bytes, 1),
    "Bytes (as the producers stored them) one subtask of an automatically sized vertex should "
    "read ('16m', '1g' or a number of bytes).",
    deprecated_keys=(_OLD + "avg-data-volume-per-task",))
AUTO_PARALLELISM_DEFAULT_SOURCE_PARALLELISM = option(
    _PREFIX + "default-source-parallelism", None, pos_int,
    "Most subtasks of a source whose parallelism the program did not set (file sources take "
    "fewer when their files are smaller than avg-data-volume-per-task per subtask); unset: the "
    "job's parallelism.",
    deprecated_keys=(_OLD + "default-source-parallelism",))
