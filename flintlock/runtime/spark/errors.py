"""Turn Spark errors into flintlock errors that name the cause and the operator.

Spark analysis errors (unresolved column, type mismatch, bad SQL), functions that cannot be
unpickled and restored keyed state of another kind (``StateMigrationException`` in a Python
worker) are non-recoverable: restarting the task cannot fix them (``non_recoverable = True``,
read by ``SerializedError.from_exception``). Other Spark errors (Python worker exceptions, lost
connections) stay recoverable.
"""

from __future__ import annotations

import re
from typing import Any

from flintlock.exceptions import FlintlockException

__all__ = [
    "FunctionLoadException",
    "OperatorException",
    "describe_spark_error",
    "is_analysis_error",
]


class OperatorException(FlintlockException):
    """An operator of a task failed; the message names operator, vertex and cause."""

    def __init__(self, message: str, *, non_recoverable: bool = False,
                 error_class: str | None = None) -> None:
        super().__init__(message)
        self.non_recoverable = non_recoverable
        self.error_class = error_class

    def __reduce__(self):
        return (_rebuild, (type(self), str(self), self.non_recoverable, self.error_class))


def _rebuild(cls: type, message: str, non_recoverable: bool, error_class: str | None) -> Any:
    return cls(message, non_recoverable=non_recoverable, error_class=error_class)


class FunctionLoadException(OperatorException):
    """A user function could not be unpickled in the TaskManager (always non-recoverable)."""


def _condition(exc: BaseException) -> str | None:
    for attr in ("getCondition", "getErrorClass"):
        fn = getattr(exc, attr, None)
        if fn is not None:
            try:
                value = fn()
            except Exception:  # pragma: no cover - defensive
                value = None
            if value:
                return str(value)
    return None


def is_analysis_error(exc: BaseException) -> bool:
    """True for Spark errors that no restart can fix (analysis, parse, illegal arguments, state
    migration)."""
    try:
        from pyspark.errors import AnalysisException, IllegalArgumentException, ParseException
    except ImportError:  # pragma: no cover
        return False
    if isinstance(exc, (AnalysisException, ParseException, IllegalArgumentException)):
        return True
    # restored keyed state that the function registers as another kind (``api.state``)
    return type(exc).__name__ == "PythonException" and "StateMigrationException:" in str(exc)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def describe_spark_error(exc: BaseException) -> str:
    """A one-line cause: ``column 'foo' does not exist (UNRESOLVED_COLUMN.WITH_SUGGESTION: ...)``."""
    condition = _condition(exc)
    params: dict[str, str] = {}
    get_params = getattr(exc, "getMessageParameters", None)
    if get_params is not None:
        try:
            params = dict(get_params() or {})
        except Exception:  # pragma: no cover - defensive
            params = {}
    message = _first_line(str(exc))
    if type(exc).__name__ == "PythonException":
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        causes = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
        if causes:
            message = f"{causes[-1]} (in the Spark Python worker)"
    if condition and condition.startswith("UNRESOLVED_COLUMN"):
        name = params.get("objectName", "?").replace("`", "")
        hint = params.get("proposal")
        cause = f"column '{name}' does not exist"
        if hint:
            cause += f" (did you mean one of {hint}?)"
        return f"{cause} ({message})"
    if condition:
        return message if condition in message else f"{message} ({condition})"
    return message
