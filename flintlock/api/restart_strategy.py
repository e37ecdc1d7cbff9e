"""Restart strategies of a job, set with ``env.set_restart_strategy(...)``.

Follows PyFlink's ``pyflink.common.restart_strategy`` (``RestartStrategies.no_restart()``,
``fall_back_restart()``, ``fixed_delay_restart(restart_attempts, delay_between_attempts)``,
``failure_rate_restart(failure_rate, failure_interval, delay_interval)``) and Flink's Java
``RestartStrategies.exponentialDelayRestart(initialBackoff, maxBackoff, backoffMultiplier,
resetBackoffThreshold, jitterFactor)``, which PyFlink lacks, as ``exponential_delay_restart``.
Durations are ``datetime.timedelta`` or an int of milliseconds, as in PyFlink.

A strategy is nothing but Flink's ``restart-strategy.*`` configuration keys
(``to_configuration()``); the job carries them in its configuration, where they override the
cluster's (Flink ``RestartBackoffTimeStrategyFactoryLoader``: job configuration, then cluster
configuration). ``fall_back_restart()`` removes them from the job, so the cluster's apply.

Constructors validate their arguments as the JobManager would and raise ``ValueError`` (bad value)
or ``TypeError`` (bad type) naming the argument.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from flintlock.api.durations import Duration, to_millis
from flintlock.config import Configuration, IllegalConfigurationException
from flintlock.config.options import (
    EXP_INITIAL,
    EXP_JITTER,
    EXP_MAX,
    EXP_MULT,
    EXP_RESET,
    FIXED_DELAY_ATTEMPTS,
    FIXED_DELAY_DELAY,
    FR_DELAY,
    FR_INTERVAL,
    FR_MAX,
    RESTART_STRATEGY,
)

__all__ = [
    "RESTART_STRATEGY_PREFIX",
    "RestartStrategies",
    "RestartStrategyConfiguration",
]

#: every key of a restart strategy starts with this
RESTART_STRATEGY_PREFIX = "restart-strategy"

def _int(name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def _ms_text(ms: int) -> str:
    return f"{ms} ms"


class RestartStrategyConfiguration:
    """A job's restart strategy as Flink configuration keys (PyFlink
    ``RestartStrategyConfiguration``)."""

    def to_configuration(self) -> dict[str, str]:
        """The ``restart-strategy.*`` keys and values this strategy sets (empty: cluster's)."""
        raise NotImplementedError

    def get_description(self) -> str:
        """A one-line description (as Flink's web interface shows it)."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and (
            other.to_configuration() == self.to_configuration()  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self.to_configuration().items()))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_description()!r})"


class RestartStrategies:
    """Factory of restart strategy configurations (PyFlink ``RestartStrategies``)."""

    class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Never restart: the first failure fails the job (``restart-strategy.type: none``)."""

        def to_configuration(self) -> dict[str, str]:
            return {RESTART_STRATEGY.key: "none"}

        def get_description(self) -> str:
            return "Restart deactivated."

    class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Use the cluster's restart strategy: the job carries no ``restart-strategy.*`` key."""

        def to_configuration(self) -> dict[str, str]:
            return {}

        def get_description(self) -> str:
            return "Cluster level default restart strategy"

    class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """``restart_attempts`` restarts, each ``delay_between_attempts_interval`` after its
        failure (``restart-strategy.type: fixed-delay``)."""

        def __init__(self, restart_attempts: int, delay_between_attempts_interval: Duration) -> None:
            self._attempts = _int("restart_attempts", restart_attempts, 0)
            self._delay_ms = to_millis("delay_between_attempts_interval",
                                     delay_between_attempts_interval)

        def get_restart_attempts(self) -> int:
            return self._attempts

        def get_delay_between_attempts_interval(self) -> datetime.timedelta:
            return datetime.timedelta(milliseconds=self._delay_ms)

        def to_configuration(self) -> dict[str, str]:
            return {
                RESTART_STRATEGY.key: "fixed-delay",
                FIXED_DELAY_ATTEMPTS.key: str(self._attempts),
                FIXED_DELAY_DELAY.key: _ms_text(self._delay_ms),
            }

        def get_description(self) -> str:
            return (f"Restart with fixed delay ({self._delay_ms} ms). "
                    f"#{self._attempts} restart attempts.")

    class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restart after ``delay_between_attempts_interval`` unless more than
        ``max_failure_rate`` failures happened within ``failure_interval``
        (``restart-strategy.type: failure-rate``)."""

        def __init__(self, max_failure_rate: int, failure_interval: Duration,
                     delay_between_attempts_interval: Duration) -> None:
            self._max = _int("max_failure_rate", max_failure_rate, 1)
            self._interval_ms = to_millis("failure_interval", failure_interval, 1)
            self._delay_ms = to_millis("delay_between_attempts_interval",
                                     delay_between_attempts_interval)

        def get_max_failure_rate(self) -> int:
            return self._max

        def get_failure_interval(self) -> datetime.timedelta:
            return datetime.timedelta(milliseconds=self._interval_ms)

        def get_delay_between_attempts_interval(self) -> datetime.timedelta:
            return datetime.timedelta(milliseconds=self._delay_ms)

        def to_configuration(self) -> dict[str, str]:
            return {
                RESTART_STRATEGY.key: "failure-rate",
                FR_MAX.key: str(self._max),
                FR_INTERVAL.key: _ms_text(self._interval_ms),
                FR_DELAY.key: _ms_text(self._delay_ms),
            }

        def get_description(self) -> str:
            return (f"Failure rate restart with maximum of {self._max} failures within interval "
                    f"{self._interval_ms} ms and fixed delay {self._delay_ms} ms.")

    class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Back-off growing from ``initial_backoff`` by ``backoff_multiplier`` up to
        ``max_backoff``, with ``jitter_factor`` jitter, reset after ``reset_backoff_threshold``
        without failures (``restart-strategy.type: exponential-delay``)."""

        def __init__(self, initial_backoff: Duration, max_backoff: Duration,
                     backoff_multiplier: float, reset_backoff_threshold: Duration,
                     jitter_factor: float) -> None:
            self._initial_ms = to_millis("initial_backoff", initial_backoff, 1)
            self._max_ms = to_millis("max_backoff", max_backoff, 1)
            if self._initial_ms > self._max_ms:
                raise ValueError(f"initial_backoff ({self._initial_ms} ms) must not exceed "
                                 f"max_backoff ({self._max_ms} ms)")
            self._multiplier = _float("backoff_multiplier", backoff_multiplier)
            if self._multiplier <= 1.0:
                raise ValueError(f"backoff_multiplier must be greater than 1, got {self._multiplier}")
            self._reset_ms = to_millis("reset_backoff_threshold", reset_backoff_threshold, 1)
            self._jitter = _float("jitter_factor", jitter_factor)
            if not 0.0 <= self._jitter <= 1.0:
                raise ValueError(f"jitter_factor must be within [0, 1], got {self._jitter}")

        def get_initial_backoff(self) -> datetime.timedelta:
            return datetime.timedelta(milliseconds=self._initial_ms)

        def get_max_backoff(self) -> datetime.timedelta:
            return datetime.timedelta(milliseconds=self._max_ms)

        def get_backoff_multiplier(self) -> float:
            return self._multiplier

        def get_reset_backoff_threshold(self) -> datetime.timedelta:
            return datetime.timedelta(milliseconds=self._reset_ms)

        def get_jitter_factor(self) -> float:
            return self._jitter

        def to_configuration(self) -> dict[str, str]:
            return {
                RESTART_STRATEGY.key: "exponential-delay",
                EXP_INITIAL.key: _ms_text(self._initial_ms),
                EXP_MAX.key: _ms_text(self._max_ms),
                EXP_MULT.key: repr(self._multiplier),
                EXP_RESET.key: _ms_text(self._reset_ms),
                EXP_JITTER.key: repr(self._jitter),
            }

        def get_description(self) -> str:
            return (f"Restart with exponential backoff: initial {self._initial_ms} ms, max "
                    f"{self._max_ms} ms, multiplier {self._multiplier}, reset threshold "
                    f"{self._reset_ms} ms, jitter factor {self._jitter}.")

    @staticmethod
    def no_restart() -> RestartStrategies.NoRestartStrategyConfiguration:
        return RestartStrategies.NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> RestartStrategies.FallbackRestartStrategyConfiguration:
        return RestartStrategies.FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: Duration,
    ) -> RestartStrategies.FixedDelayRestartStrategyConfiguration:
        """``restart_attempts`` restarts, ``delay_between_attempts`` (timedelta or ms) apart."""
        return RestartStrategies.FixedDelayRestartStrategyConfiguration(
            restart_attempts, delay_between_attempts)

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: Duration, delay_interval: Duration,
    ) -> RestartStrategies.FailureRateRestartStrategyConfiguration:
        """At most ``failure_rate`` failures per ``failure_interval``; ``delay_interval`` apart."""
        return RestartStrategies.FailureRateRestartStrategyConfiguration(
            failure_rate, failure_interval, delay_interval)

    @staticmethod
    def exponential_delay_restart(
        initial_backoff: Duration, max_backoff: Duration, backoff_multiplier: float,
        reset_backoff_threshold: Duration, jitter_factor: float,
    ) -> RestartStrategies.ExponentialDelayRestartStrategyConfiguration:
        """Exponential back-off (Flink ``RestartStrategies.exponentialDelayRestart``)."""
        return RestartStrategies.ExponentialDelayRestartStrategyConfiguration(
            initial_backoff, max_backoff, backoff_multiplier, reset_backoff_threshold,
            jitter_factor)

    @staticmethod
    def from_configuration(
        configuration: Configuration | Mapping[str, Any],
    ) -> RestartStrategyConfiguration:
        """The strategy that ``restart-strategy.*`` keys select (fallback when none is set).

        Raises:
            IllegalConfigurationException: a key has an invalid value.
        """
        conf = configuration if isinstance(configuration, Configuration) else Configuration(
            configuration)
        try:
            return _from_configuration(conf)
        except (TypeError, ValueError) as exc:
            raise IllegalConfigurationException(
                f"Invalid restart strategy configuration: {exc}") from None


def _from_configuration(conf: Configuration) -> RestartStrategyConfiguration:
    kind = conf.get(RESTART_STRATEGY)
    if kind is None:
        return RestartStrategies.fall_back_restart()
    kind = kind.lower().replace("-", "")
    if kind in ("none", "off", "disable"):
        return RestartStrategies.no_restart()
    if kind == "fixeddelay":
        return RestartStrategies.fixed_delay_restart(
            conf.get(FIXED_DELAY_ATTEMPTS), _seconds_to_ms(conf.get(FIXED_DELAY_DELAY)))
    if kind == "failurerate":
        return RestartStrategies.failure_rate_restart(
            conf.get(FR_MAX), _seconds_to_ms(conf.get(FR_INTERVAL)),
            _seconds_to_ms(conf.get(FR_DELAY)))
    return RestartStrategies.exponential_delay_restart(
        _seconds_to_ms(conf.get(EXP_INITIAL)), _seconds_to_ms(conf.get(EXP_MAX)),
        conf.get(EXP_MULT), _seconds_to_ms(conf.get(EXP_RESET)), conf.get(EXP_JITTER))


def _seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)
