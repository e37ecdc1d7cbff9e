"""Configuration of the AdaptiveBatchScheduler and speculative execution (fact sheet 7.4, 7.5;
Flink ``BatchExecutionOptions``, ``SlowTaskDetectorOptions``).

Registered in ``OPTIONS`` when ``flintlock.config.options`` is imported. Keys, defaults and the old
``jobmanager.adaptive-batch-scheduler.*`` keys follow Flink's.
"""

from __future__ import annotations

from typing import Any

from flintlock.config.options import (
    _at_least,
    _bool,
    _float,
    duration,
    option,
    parse_memory_bytes,
    pos_int,
)

__all__ = [
    "AUTO_PARALLELISM_AVG_DATA_VOLUME_PER_TASK",
    "AUTO_PARALLELISM_DEFAULT_SOURCE_PARALLELISM",
    "AUTO_PARALLELISM_ENABLED",
    "AUTO_PARALLELISM_MAX",
    "AUTO_PARALLELISM_MIN",
    "RUNTIME_CHAINING_ENABLED",
    "SLOW_TASK_BASELINE_LOWER_BOUND",
    "SLOW_TASK_BASELINE_MULTIPLIER",
    "SLOW_TASK_BASELINE_RATIO",
    "SLOW_TASK_CHECK_INTERVAL",
    "SPECULATIVE_BLOCK_SLOW_NODE_DURATION",
    "SPECULATIVE_ENABLED",
    "SPECULATIVE_MAX_CONCURRENT_EXECUTIONS",
    "WHOLE_JOB_CHAINING_ENABLED",
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
    "(parallelism.default, -p or env.set_parallelism), at most the Spark cores of the "
    "cluster's TaskManagers when they all run embedded Spark servers. Producers write this "
    "many subpartitions for an automatically sized consumer.",
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
    "job's parallelism, at most the cluster's Spark cores (as for max-parallelism).",
    deprecated_keys=(_OLD + "default-source-parallelism",))


RUNTIME_CHAINING_ENABLED = option(
    "execution.batch.adaptive.runtime-chaining.enabled", True, _bool,
    "The AdaptiveBatchScheduler chains a vertex's only consumer into it when both run one "
    "subtask and the consumer reads only that vertex (a flintlock extension: Flink chains at "
    "compile time only): one Spark job instead of two, and no partition written and read "
    "between them. Also off when pipeline.operator-chaining.enabled is false.")


WHOLE_JOB_CHAINING_ENABLED = option(
    "execution.batch.adaptive.runtime-chaining.whole-job.enabled", True, _bool,
    "When every vertex of a BATCH job runs one subtask (one Spark server in the cluster, or "
    "parallelism 1), the AdaptiveBatchScheduler chains the whole job into one task whose "
    "vertices read their producers' outputs as DataFrames: one Spark plan, no partitions (a "
    "flintlock extension, like Flink's multiple-input operator fusion). Needs "
    "execution.batch.adaptive.runtime-chaining.enabled.")


def _ratio(value: Any) -> float:
    ratio = _float(value)
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"{value!r} is not in [0, 1)")
    return ratio


def _positive_float(value: Any) -> float:
    number = _float(value)
    if number <= 0:
        raise ValueError(f"{value!r} is not above 0")
    return number


_SPECULATIVE = "execution.batch.speculative."
_OLD_SPECULATIVE = _OLD + "speculative."

SPECULATIVE_ENABLED = option(
    _SPECULATIVE + "enabled", False, _bool,
    "Slow subtasks of BATCH jobs get speculative attempts on other TaskManagers; the first "
    "attempt to finish wins and the others are cancelled (AdaptiveBatch scheduler only).",
    deprecated_keys=(_OLD_SPECULATIVE + "enabled",))
SPECULATIVE_MAX_CONCURRENT_EXECUTIONS = option(
    _SPECULATIVE + "max-concurrent-executions", 2, _at_least(pos_int, 2),
    "Most attempts of one subtask running at once, the original included.",
    deprecated_keys=(_OLD_SPECULATIVE + "max-concurrent-executions",))
SPECULATIVE_BLOCK_SLOW_NODE_DURATION = option(
    _SPECULATIVE + "block-slow-node-duration", 60.0, _at_least(duration, 0),
    "How long a TaskManager that runs a slow subtask gets no new slots ('1 min'; 0: not "
    "blocked).",
    deprecated_keys=(_OLD_SPECULATIVE + "block-slow-node-duration",))

_DETECTOR = "slow-task-detector."
SLOW_TASK_CHECK_INTERVAL = option(
    _DETECTOR + "check-interval", 1.0, _at_least(duration, 0.001),
    "How often running subtasks are checked for slowness ('1 s').")
SLOW_TASK_BASELINE_RATIO = option(
    _DETECTOR + "execution-time.baseline-ratio", 0.75, _ratio,
    "Share of a vertex's subtasks that must have finished before its slow subtasks are looked "
    "for; the baseline is the median time of that many fastest finished subtasks.")
SLOW_TASK_BASELINE_MULTIPLIER = option(
    _DETECTOR + "execution-time.baseline-multiplier", 1.5, _positive_float,
    "A subtask is slow once it ran this many times the baseline.")
SLOW_TASK_BASELINE_LOWER_BOUND = option(
    _DETECTOR + "execution-time.baseline-lower-bound", 60.0, _at_least(duration, 0),
    "A subtask is never slow before it ran this long ('1 min').")
