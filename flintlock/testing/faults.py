"""Fault injection in user functions: fail the first N attempts at record K; block on a gate.

User functions of ``map``, ``flat_map`` and ``filter`` run in Spark's Python workers (other
processes, possibly several at once), so the state these helpers share lives in files of a
directory the test passes in (a ``tmp_path``), never in Python objects::

    failures = FailureBudget(str(tmp_path / "failures"), times=1)
    ds.map(fail_at_record(lambda r: (r.id, r.id * 2), record=7, budget=failures), "id long, v long")

    gate = Gate(str(tmp_path / "gate"))
    ds.map(gate.blocking(lambda r: r, record=1), "id long")   # waits at record 1 until gate.open()

``fail_at_record`` raises ``InjectedFailure("Injected failure at record 7 (attempt 1)")`` each
time record 7 is reached until ``times`` failures were injected (one marker file per failure,
created atomically with ``O_EXCL``, so concurrent workers never both claim the same one); later
attempts pass. The same wrapper serves ``map``, ``flat_map`` and ``filter``: it checks the record,
then calls the wrapped function. ``Gate.blocking`` polls for the gate file (every 20 ms) and gives
up after ``timeout_s`` with an ``InjectedFailure``: a slow input, never a hang.

Both need a directory the Spark workers can reach: a local path with a local Spark (MiniCluster,
tests), or a shared filesystem otherwise. The wrapped function is pickled like any user function
(the program's own modules, e.g. the test module, by value), so it may be a module-level function
of a test file that the Spark workers cannot import.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import cloudpickle

__all__ = ["FailureBudget", "Gate", "InjectedFailure", "fail_at_record", "fail_at_records"]

_POLL_S = 0.02


class InjectedFailure(RuntimeError):
    """A failure injected on purpose by a test."""


def _rebuild(cls: type[Any], fn_payload: bytes, rest: tuple[Any, ...]) -> Any:
    return cls(cloudpickle.loads(fn_payload), *rest)


class _ShipsWrappedFunctionByValue:
    """Pickles the wrapped ``fn`` (first field) as flintlock pickles user functions."""

    def __reduce__(self) -> tuple[Any, ...]:
        from flintlock.graph.user_code import dumps_user_function

        names = [f.name for f in fields(self)]  # type: ignore[arg-type]
        rest = tuple(getattr(self, n) for n in names[1:])
        return (_rebuild, (type(self), dumps_user_function(getattr(self, names[0])), rest))


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


def _value(row: Any, field: str) -> Any:
    try:
        return row[field]
    except (KeyError, IndexError, TypeError, ValueError):
        return getattr(row, field, None)


@dataclass(frozen=True)
class FailureBudget:
    """How many failures may still be injected, counted with marker files in ``directory``.

    Attributes:
        directory: created on first use; holds ``failure-<n>`` markers.
        times: failures to inject in total (the first ``times`` attempts that reach the record).
    """

    directory: str
    times: int = 1

    def __post_init__(self) -> None:
        if self.times < 0:
            raise ValueError(f"times must be >= 0, got {self.times}")

    def take(self) -> int | None:
        """Claim the next failure: its number (1-based), or None once all were injected."""
        os.makedirs(self.directory, exist_ok=True)
        for n in range(1, self.times + 1):
            try:
                fd = os.open(os.path.join(self.directory, f"failure-{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.close(fd)
            return n
        return None

    def used(self) -> int:
        """How many failures were injected so far."""
        if not os.path.isdir(self.directory):
            return 0
        return sum(1 for name in os.listdir(self.directory) if name.startswith("failure-"))


@dataclass(frozen=True, repr=False)
class FailAtRecord(_ShipsWrappedFunctionByValue):
    """Wraps a map/flat_map/filter function; fails at record ``record`` while the budget lasts.

    ``record`` is compared with the row's ``field`` (``row[field]``). Picklable (cloudpickle ships
    it to the Spark workers by reference to this module).
    """

    fn: Callable[..., Any]
    record: Any
    budget: FailureBudget
    field: str = "id"

    def __repr__(self) -> str:  # the function's name in plans and error messages
        return f"fail_at_record({_name(self.fn)}, record={self.record!r})"

    def __call__(self, row: Any, *rest: Any) -> Any:
        if _value(row, self.field) == self.record:
            n = self.budget.take()
            if n is not None:
                raise InjectedFailure(f"Injected failure at record {self.record!r} (attempt {n})")
        return self.fn(row, *rest)


def fail_at_record(fn: Callable[..., Any], *, record: Any, budget: FailureBudget,
                   field: str = "id") -> FailAtRecord:
    """``fn``, failing the first ``budget.times`` attempts that reach the row whose ``field`` is
    ``record`` with ``InjectedFailure("Injected failure at record <record> (attempt <n>)")``."""
    return FailAtRecord(fn, record, budget, field)


@dataclass(frozen=True, repr=False)
class FailAtRecords(_ShipsWrappedFunctionByValue):
    """Wraps a map/flat_map/filter function; fails once at each record of ``records``.

    Each record has its own one-failure budget (``<directory>/record-<record>``), so a record
    reached again after a restore (a source rewound to a checkpoint) passes; the seeded
    fault-injection runs place their task failures this way.
    """

    fn: Callable[..., Any]
    records: frozenset[Any]
    directory: str
    field: str = "id"

    def __repr__(self) -> str:
        return f"fail_at_records({_name(self.fn)}, records={sorted(self.records)!r})"

    def budget(self, record: Any) -> FailureBudget:
        return FailureBudget(os.path.join(self.directory, f"record-{record}"), 1)

    def __call__(self, row: Any, *rest: Any) -> Any:
        record = _value(row, self.field)
        if record in self.records and self.budget(record).take() is not None:
            raise InjectedFailure(f"Injected failure at record {record!r}")
        return self.fn(row, *rest)

    def used(self) -> list[Any]:
        """The records at which a failure was injected so far."""
        return sorted(r for r in self.records if self.budget(r).used())


def fail_at_records(fn: Callable[..., Any], *, records: Any, directory: str,
                    field: str = "id") -> FailAtRecords:
    """``fn``, failing once at each row whose ``field`` is in ``records`` with
    ``InjectedFailure("Injected failure at record <record>")``; failures are counted with marker
    files under ``directory``."""
    return FailAtRecords(fn, frozenset(records), directory, field)


@dataclass(frozen=True)
class Gate:
    """A file-based gate user functions can wait on (``blocking``) until the test ``open``s it.

    Attributes:
        directory: created on first use; holds the ``open`` file and one ``waiting-*`` marker per
            wait that started (so a test can see that a function is blocked).
    """

    directory: str

    @property
    def _open_path(self) -> str:
        return os.path.join(self.directory, "open")

    def open(self) -> None:
        """Let every waiting and future call pass."""
        os.makedirs(self.directory, exist_ok=True)
        with open(self._open_path, "w"):
            pass

    @property
    def is_open(self) -> bool:
        return os.path.exists(self._open_path)

    def waiters(self) -> int:
        """How many waits started (including finished ones)."""
        if not os.path.isdir(self.directory):
            return 0
        return sum(1 for name in os.listdir(self.directory) if name.startswith("waiting-"))

    def wait(self, timeout_s: float) -> None:
        """Block until the gate is open.

        Raises:
            InjectedFailure: not opened within ``timeout_s`` seconds.
        """
        if self.is_open:
            return
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, f"waiting-{os.getpid()}-{uuid.uuid4().hex[:8]}"), "w"):
            pass
        deadline = time.monotonic() + timeout_s
        while not self.is_open:
            if time.monotonic() > deadline:
                raise InjectedFailure(f"gate {self.directory} was not opened within {timeout_s:g} s")
            time.sleep(_POLL_S)

    def blocking(self, fn: Callable[..., Any], *, record: Any = None, field: str = "id",
                 timeout_s: float = 60.0) -> GatedFunction:
        """``fn``, waiting for the gate before it handles the row whose ``field`` is ``record``
        (every row when ``record`` is None)."""
        return GatedFunction(fn, self, record, field, timeout_s)


@dataclass(frozen=True, repr=False)
class GatedFunction(_ShipsWrappedFunctionByValue):
    """A map/flat_map/filter function that waits for a ``Gate`` at one record (or every record)."""

    fn: Callable[..., Any]
    gate: Gate
    record: Any = None
    field: str = "id"
    timeout_s: float = 60.0

    def __repr__(self) -> str:  # the function's name in plans and error messages
        return f"gated({_name(self.fn)}, record={self.record!r})"

    def __call__(self, row: Any, *rest: Any) -> Any:
        if self.record is None or _value(row, self.field) == self.record:
            self.gate.wait(self.timeout_s)
        return self.fn(row, *rest)
