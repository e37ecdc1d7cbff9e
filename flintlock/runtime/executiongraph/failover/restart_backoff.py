"""Restart back-off strategies (pure; ``now`` in seconds is passed in).

Follows Flink's ``*RestartBackoffTimeStrategy`` classes and ``RestartBackoffTimeStrategyFactoryLoader``
(fact sheet 6). Protocol: on every failure the handler calls ``notify_failure(now)`` (True when the
failure counts as a new restart attempt), then ``can_restart(now)`` and ``backoff_time_s(now)``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from flintlock.config import options
from flintlock.config.configuration import Configuration, IllegalConfigurationException

__all__ = [
    "ExponentialDelayRestartBackoffTimeStrategy",
    "FailureRateRestartBackoffTimeStrategy",
    "FixedDelayRestartBackoffTimeStrategy",
    "NoRestartBackoffTimeStrategy",
    "RestartBackoffTimeStrategy",
    "restart_backoff_from_configuration",
]


class RestartBackoffTimeStrategy(Protocol):
    """Decides whether and when a failed job (or region) restarts."""

    def notify_failure(self, now: float) -> bool:
        """Record a failure at ``now`` (seconds); True if it counts as a new restart attempt."""
        ...

    def can_restart(self, now: float) -> bool: ...

    def backoff_time_s(self, now: float) -> float:
        """Seconds to wait before restarting."""
        ...

    def describe(self) -> str: ...


class NoRestartBackoffTimeStrategy:
    """Never restart (the default without checkpointing)."""

    def notify_failure(self, now: float) -> bool:
        return True

    def can_restart(self, now: float) -> bool:
        return False

    def backoff_time_s(self, now: float) -> float:
        return 0.0

    def describe(self) -> str:
        return "NoRestartBackoffTimeStrategy"


class FixedDelayRestartBackoffTimeStrategy:
    """``attempts`` restarts, each after ``delay_s``."""

    def __init__(self, attempts: int, delay_s: float) -> None:
        if attempts < 0 or delay_s < 0:
            raise ValueError("fixed-delay: attempts and delay must be >= 0")
        self.attempts = attempts
        self.delay_s = delay_s
        self.current_attempt = 0

    def notify_failure(self, now: float) -> bool:
        self.current_attempt += 1
        return True

    def can_restart(self, now: float) -> bool:
        return self.current_attempt <= self.attempts

    def backoff_time_s(self, now: float) -> float:
        return self.delay_s

    def describe(self) -> str:
        return f"FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts={self.attempts}, backoffTimeMS={int(self.delay_s * 1000)})"


class FailureRateRestartBackoffTimeStrategy:
    """At most ``max_failures`` failures within any ``interval_s``; restarts after ``delay_s``."""

    def __init__(self, max_failures: int, interval_s: float, delay_s: float) -> None:
        if max_failures < 1 or interval_s <= 0 or delay_s < 0:
            raise ValueError("failure-rate: max failures >= 1, interval > 0, delay >= 0 required")
        self.max_failures = max_failures
        self.interval_s = interval_s
        self.delay_s = delay_s
        self._timestamps: deque[float] = deque()

    def _full(self) -> bool:
        return len(self._timestamps) >= self.max_failures + 1

    def notify_failure(self, now: float) -> bool:
        if self._full():
            self._timestamps.popleft()
        self._timestamps.append(now)
        return True

    def can_restart(self, now: float) -> bool:
        if self._full():
            return now - self._timestamps[0] > self.interval_s
        return True

    def backoff_time_s(self, now: float) -> float:
        return self.delay_s

    def describe(self) -> str:
        return (
            f"FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={int(self.interval_s * 1000)}, "
            f"backoffTimeMS={int(self.delay_s * 1000)}, maxFailuresPerInterval={self.max_failures})"
        )


class ExponentialDelayRestartBackoffTimeStrategy:
    """Back-off grows ``initial * multiplier^attempt`` (with jitter) up to ``max``; resets after a
    quiet ``reset_threshold``; failures before the scheduled restart merge into one attempt.
    """

    def __init__(
        self,
        initial_s: float,
        max_s: float,
        multiplier: float,
        reset_threshold_s: float,
        jitter_factor: float,
        attempts_before_reset: int,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if initial_s < 0.001:
            raise ValueError("exponential-delay: initial-backoff must be >= 1 ms")
        if initial_s > max_s:
            raise ValueError("exponential-delay: initial-backoff must be <= max-backoff")
        if multiplier <= 1:
            raise ValueError("exponential-delay: backoff-multiplier must be > 1")
        if not 0 <= jitter_factor <= 1:
            raise ValueError("exponential-delay: jitter-factor must be in [0, 1]")
        if attempts_before_reset < 1:
            raise ValueError("exponential-delay: attempts-before-reset-backoff must be >= 1")
        self.initial_s = initial_s
        self.max_s = max_s
        self.multiplier = multiplier
        self.reset_threshold_s = reset_threshold_s
        self.jitter_factor = jitter_factor
        self.attempts_before_reset = attempts_before_reset
        self._rng = rng
        self.current_attempt = 0
        self.current_backoff_s = 0.0
        self.next_restart_at = float("-inf")

    def _compute_backoff(self) -> float:
        backoff = min(self.initial_s * self.multiplier**self.current_attempt, self.max_s)
        jitter = 0.0
        if self.jitter_factor > 0:
            jitter = (self._rng() * 2 - 1) * backoff * self.jitter_factor
        return max(self.initial_s, min(self.max_s, backoff + jitter))

    def notify_failure(self, now: float) -> bool:
        if now <= self.next_restart_at:
            return False  # merged into the already scheduled restart
        if now - self.next_restart_at >= self.reset_threshold_s:
            self.current_attempt = 0
        self.current_backoff_s = self._compute_backoff()
        self.next_restart_at = now + self.current_backoff_s
        self.current_attempt += 1
        return True

    def can_restart(self, now: float) -> bool:
        return self.current_attempt <= self.attempts_before_reset

    def backoff_time_s(self, now: float) -> float:
        return max(0.0, self.next_restart_at - now)

    def describe(self) -> str:
        return (
            f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={int(self.initial_s * 1000)}, "
            f"maxBackoffMS={int(self.max_s * 1000)}, multiplier={self.multiplier}, "
            f"resetBackoffThresholdMS={int(self.reset_threshold_s * 1000)}, "
            f"jitterFactor={self.jitter_factor}, attemptsBeforeResetBackoff={self.attempts_before_reset})"
        )


def restart_backoff_from_configuration(
    configuration: Configuration | Mapping[str, Any],
    rng: Callable[[], float] = random.random,
) -> RestartBackoffTimeStrategy:
    """The strategy ``restart-strategy.type`` selects. Unset: exponential-delay when
    checkpointing is on (``execution.checkpointing.interval``), else none (Flink
    ``RestartBackoffTimeStrategyFactoryLoader``).

    Raises:
        IllegalConfigurationException: a bad value of one of the ``restart-strategy.*`` keys.
    """
    conf = configuration if isinstance(configuration, Configuration) else Configuration(configuration)
    kind = conf.get(options.RESTART_STRATEGY)
    if kind is None:
        kind = "exponential-delay" if conf.get(options.CHECKPOINTING_INTERVAL) else "none"
    kind = kind.lower()
    try:
        if kind in ("none", "off", "disable"):
            return NoRestartBackoffTimeStrategy()
        if kind in ("fixed-delay", "fixeddelay"):
            return FixedDelayRestartBackoffTimeStrategy(
                conf.get(options.FIXED_DELAY_ATTEMPTS), conf.get(options.FIXED_DELAY_DELAY)
            )
        if kind in ("failure-rate", "failurerate"):
            return FailureRateRestartBackoffTimeStrategy(
                conf.get(options.FR_MAX), conf.get(options.FR_INTERVAL), conf.get(options.FR_DELAY)
            )
        return ExponentialDelayRestartBackoffTimeStrategy(
            conf.get(options.EXP_INITIAL),
            conf.get(options.EXP_MAX),
            conf.get(options.EXP_MULT),
            conf.get(options.EXP_RESET),
            conf.get(options.EXP_JITTER),
            conf.get(options.EXP_ATTEMPTS),
            rng,
        )
    except ValueError as exc:
        raise IllegalConfigurationException(f"Invalid restart strategy configuration: {exc}") from None
