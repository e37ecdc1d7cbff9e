"""Keyed state restored under a name the function now registers as another kind of state
(``_KeyScope.load`` / ``RuntimeContext`` registration): Flink's ``StateMigrationException``."""

from __future__ import annotations

import pytest

from flintlock.api.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    RuntimeContext,
    StateMigrationException,
    ValueStateDescriptor,
    _KeyScope,
)


def test_state_registered_in_open_is_checked_when_a_key_is_loaded() -> None:
    scope = _KeyScope()
    RuntimeContext(scope).get_list_state(ListStateDescriptor("count"))
    scope.load({"seen": 1}, {"seen": "value"})  # a name the function does not use: kept as is
    with pytest.raises(StateMigrationException, match="'count' was restored as a value state, "
                                                      "but the function now registers it as a "
                                                      "list state"):
        scope.load({"count": 3}, {"count": "value"})


def test_state_registered_later_is_checked_against_the_current_keys_kinds() -> None:
    scope = _KeyScope()
    context = RuntimeContext(scope)
    scope.load({"first": {"at": 1}, "count": 2}, {"first": "map", "count": "value"})
    context.get_map_state(MapStateDescriptor("first"))  # same kind: fine
    with pytest.raises(StateMigrationException, match="'count' was restored as a value state"):
        context.get_list_state(ListStateDescriptor("count"))


def test_state_stored_before_kinds_were_recorded_restores() -> None:
    scope = _KeyScope()
    RuntimeContext(scope).get_state(ValueStateDescriptor("count"))
    scope.load({"count": 3}, {})
    assert scope.get("count") == 3
