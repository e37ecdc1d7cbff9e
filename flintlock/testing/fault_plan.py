"""Seeded fault plans for exactly-once runs of checkpointed STREAMING jobs (pure; no I/O).

A ``FaultPlan`` is what one seeded run injects, after Flink's fault-injection ITCases and
Jepsen-style runs:

- ``failing_records``: source records at which a task fails once (a ``fail_at_records`` map right
  after the source; a record replayed after a restore passes);
- ``timed``: faults the harness injects from outside, in order, each ``delay_s`` seconds after the
  job is RUNNING again and completed a checkpoint since the previous fault:

  - ``kill-taskmanager``: SIGKILL a TaskManager running the job (its process group, Spark JVM
    included); a replacement is started, as a Kubernetes deployment would;
  - ``decline-checkpoint``: the next checkpoint's directory is taken by a file, so the tasks
    cannot store their state and decline it (a storage outage);
  - ``expire-checkpoint``: a TaskManager is paused (SIGSTOP, as a long GC pause) for longer than
    ``execution.checkpointing.timeout``, so the pending checkpoint expires.

``target`` chooses among the candidates (TaskManagers running the job, sorted) by ``target %
len(candidates)``, so one plan applies to any cluster. The same seed always gives the same plan::

    plan = plan_faults(7, records=6000)
    plan.describe()  # 'seed 7: fail at records [1204, 4410]; expire-checkpoint +1.3 s, ...'
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

__all__ = ["FaultKind", "FaultPlan", "TimedFault", "plan_faults"]


class FaultKind(str, Enum):
    """A fault injected from outside the job (see the module docstring)."""

    KILL_TASK_MANAGER = "kill-taskmanager"
    DECLINE_CHECKPOINT = "decline-checkpoint"
    EXPIRE_CHECKPOINT = "expire-checkpoint"


@dataclass(frozen=True)
class TimedFault:
    """One fault of a plan.

    Attributes:
        kind: what is injected.
        delay_s: seconds after the job recovered from the previous fault (RUNNING, a new
            checkpoint completed) until this one is injected.
        target: chooses the TaskManager (``target % len(candidates)`` of the sorted candidates).
    """

    kind: FaultKind
    delay_s: float
    target: int


@dataclass(frozen=True)
class FaultPlan:
    """What one seeded run injects: task failures at records, then timed faults in order."""

    seed: int
    failing_records: tuple[int, ...]
    timed: tuple[TimedFault, ...]

    def describe(self) -> str:
        timed = ", ".join(f"{f.kind.value} +{f.delay_s:.1f} s" for f in self.timed)
        return (f"seed {self.seed}: fail at records {list(self.failing_records)}; "
                f"{timed or 'no timed faults'}")


def plan_faults(seed: int, *, records: int, task_failures: int = 2, kills: int = 1,
                declines: int = 1, expiries: int = 1, max_delay_s: float = 3.0) -> FaultPlan:
    """The plan of run ``seed`` over a source of ``records`` records (ids ``0..records-1``).

    Task failures fall in the middle 80% of the records (so each hits a running job with a
    completed checkpoint behind it, not its first or last epoch); the timed faults come in a
    seeded order with delays uniform in ``[0, max_delay_s]``.

    Raises:
        ValueError: a negative count, or more task failures than records in the middle 80%.
    """
    counts = {"task_failures": task_failures, "kills": kills, "declines": declines,
              "expiries": expiries}
    if any(n < 0 for n in counts.values()):
        raise ValueError(f"fault counts must be >= 0, got {counts}")
    low, high = records // 10, records - records // 10
    if task_failures > high - low:
        raise ValueError(f"{task_failures} task failures do not fit in records [{low}, {high})")
    rng = random.Random(seed)
    failing = tuple(sorted(rng.sample(range(low, high), task_failures)))
    kinds = ([FaultKind.KILL_TASK_MANAGER] * kills + [FaultKind.DECLINE_CHECKPOINT] * declines
             + [FaultKind.EXPIRE_CHECKPOINT] * expiries)
    rng.shuffle(kinds)
    timed = tuple(TimedFault(kind, round(rng.uniform(0.0, max_delay_s), 2), rng.randrange(1 << 16))
                  for kind in kinds)
    return FaultPlan(seed, failing, timed)
