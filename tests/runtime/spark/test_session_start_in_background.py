"""``SparkSessionProvider.start_in_background``: one creation, shared with ``get()`` (no Spark
started: ``_create`` is replaced by a gated fake)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from flintlock.config import Configuration
from flintlock.runtime.spark.session import SparkSessionProvider

DEADLINE_S = 10.0


class _GatedCreate:
    """A ``_create`` that blocks until ``release`` and counts its calls."""

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self._result = result if result is not None else object()
        self._error = error

    def __call__(self) -> Any:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(DEADLINE_S), "the test never released the fake creation"
        if self._error is not None:
            raise self._error
        return self._result


def _provider(create: _GatedCreate, monkeypatch: pytest.MonkeyPatch) -> SparkSessionProvider:
    provider = SparkSessionProvider(Configuration())
    monkeypatch.setattr(provider, "_create", create)
    return provider


def test_the_caller_goes_on_while_the_session_is_created_and_get_returns_the_same_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    create = _GatedCreate()
    provider = _provider(create, monkeypatch)
    future = provider.start_in_background()
    assert create.entered.wait(DEADLINE_S), "the session was not being created in the background"
    assert not future.done()  # the caller got control back while creation still runs
    assert provider.start_in_background() is future  # a second start does not create again
    create.release.set()
    session = future.result(timeout=DEADLINE_S)
    assert provider.get() is session
    assert create.calls == 1


def test_a_failed_creation_reaches_whoever_waits_for_the_session(
        monkeypatch: pytest.MonkeyPatch) -> None:
    create = _GatedCreate(error=RuntimeError("JAVA_GATEWAY_EXITED"))
    provider = _provider(create, monkeypatch)
    future = provider.start_in_background()
    create.release.set()
    with pytest.raises(RuntimeError, match="JAVA_GATEWAY_EXITED"):
        future.result(timeout=DEADLINE_S)
    assert create.calls == 1
