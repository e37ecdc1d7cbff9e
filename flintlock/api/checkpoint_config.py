"""Checkpointing settings of a program: ``env.enable_checkpointing`` and ``CheckpointConfig``.

Follows PyFlink ``pyflink.datastream.checkpoint_config.CheckpointConfig`` and
``CheckpointingMode``; every setter writes Flink's configuration key into the environment's
program configuration (``execution.checkpointing.*``, ``state.checkpoints.*``), so ``-D`` and
``config.yaml`` set the same thing and the job carries it to the JobMaster. Durations are
milliseconds (int) or ``datetime.timedelta``, as in PyFlink.
"""

from __future__ import annotations

import enum
from typing import Any

from flintlock.api.durations import Duration, to_millis
from flintlock.config import options

__all__ = ["CheckpointConfig", "CheckpointingMode", "ExternalizedCheckpointRetention"]


class CheckpointingMode(enum.Enum):
    """Flink ``CheckpointingMode``: EXACTLY_ONCE aligns barriers, AT_LEAST_ONCE does not."""

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


class ExternalizedCheckpointRetention(enum.Enum):
    """Flink ``ExternalizedCheckpointRetention``: whether retained checkpoints outlive the job."""

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"


class CheckpointConfig:
    """A view on the environment's checkpointing keys (``env.get_checkpoint_config()``).

    Args:
        environment: the ``StreamExecutionEnvironment`` whose program configuration it edits.
    """

    def __init__(self, environment: Any) -> None:
        self._env = environment

    def _set(self, option: Any, value: Any) -> CheckpointConfig:
        self._env.configure({option.key: value})
        return self

    def _get(self, option: Any) -> Any:
        return self._env.get_configuration().get(option)

    def is_checkpointing_enabled(self) -> bool:
        return self._get(options.CHECKPOINTING_INTERVAL) is not None

    def set_checkpoint_interval(self, interval: Duration) -> CheckpointConfig:
        """Trigger a checkpoint every ``interval`` (at least 10 ms, Flink's minimum).

        Raises:
            ValueError: below 10 ms. TypeError: not a timedelta or int.
        """
        return self._set(options.CHECKPOINTING_INTERVAL,
                         f"{to_millis('checkpoint interval', interval, 10)} ms")

    def get_checkpoint_interval(self) -> int:
        """The interval in ms, or -1 when checkpointing is off (as PyFlink)."""
        seconds = self._get(options.CHECKPOINTING_INTERVAL)
        return -1 if seconds is None else round(seconds * 1000)

    def set_checkpointing_mode(self, mode: CheckpointingMode) -> CheckpointConfig:
        return self._set(options.CHECKPOINTING_MODE, CheckpointingMode(mode).value)

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return CheckpointingMode(self._get(options.CHECKPOINTING_MODE))

    def set_checkpoint_timeout(self, timeout: Duration) -> CheckpointConfig:
        return self._set(options.CHECKPOINTING_TIMEOUT,
                         f"{to_millis('checkpoint timeout', timeout, 1)} ms")

    def get_checkpoint_timeout(self) -> int:
        return round(self._get(options.CHECKPOINTING_TIMEOUT) * 1000)

    def set_min_pause_between_checkpoints(self, min_pause: Duration) -> CheckpointConfig:
        return self._set(options.CHECKPOINTING_MIN_PAUSE,
                         f"{to_millis('min pause between checkpoints', min_pause)} ms")

    def get_min_pause_between_checkpoints(self) -> int:
        return round(self._get(options.CHECKPOINTING_MIN_PAUSE) * 1000)

    def set_max_concurrent_checkpoints(self, number: int) -> CheckpointConfig:
        return self._set(options.CHECKPOINTING_MAX_CONCURRENT, number)

    def get_max_concurrent_checkpoints(self) -> int:
        return int(self._get(options.CHECKPOINTING_MAX_CONCURRENT))

    def set_tolerable_checkpoint_failure_number(self, number: int) -> CheckpointConfig:
        return self._set(options.CHECKPOINTING_TOLERABLE_FAILURES, number)

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return int(self._get(options.CHECKPOINTING_TOLERABLE_FAILURES))

    def set_externalized_checkpoint_retention(
            self, retention: ExternalizedCheckpointRetention) -> CheckpointConfig:
        return self._set(options.CHECKPOINTS_RETENTION,
                         ExternalizedCheckpointRetention(retention).value)

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return ExternalizedCheckpointRetention(self._get(options.CHECKPOINTS_RETENTION))

    def set_checkpoint_storage_dir(self, directory: str) -> CheckpointConfig:
        """Where completed checkpoints go (``state.checkpoints.dir``; a path or URI)."""
        return self._set(options.CHECKPOINTS_DIR, str(directory))

    def get_checkpoint_storage_dir(self) -> str | None:
        return self._get(options.CHECKPOINTS_DIR)
