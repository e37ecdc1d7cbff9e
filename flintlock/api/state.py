"""Keyed state and timers as a ``KeyedProcessFunction`` sees them (PyFlink names).

``open(runtime_context)`` asks for state handles with descriptors; every handle is scoped to the
key of the record or timer being processed (Flink's keyed state backend):

- ``runtime_context.get_state(ValueStateDescriptor("n", type_info))`` -> ``ValueState``:
  ``value()`` (None when unset), ``update(v)``, ``clear()``.
- ``get_list_state(ListStateDescriptor(...))`` -> ``ListState``: ``get()``, ``add(v)``,
  ``add_all(vs)``, ``update(vs)``, ``clear()``.
- ``get_map_state(MapStateDescriptor(...))`` -> ``MapState``: ``get(k)``, ``put(k, v)``,
  ``put_all(d)``, ``remove(k)``, ``contains(k)``, ``keys()``, ``values()``, ``items()``,
  ``is_empty()``, ``clear()``.

``ctx.timer_service()`` registers event-time timers (fire when the watermark reaches them) and
processing-time timers (fire when the clock does), in epoch ms; ``on_timer(timestamp, ctx)`` runs
for each, in timestamp order. ``type_info`` arguments are accepted for PyFlink compatibility;
values are stored as Python objects (cloudpickled per key in the operator's state table).

Raises ``KeyedStateError`` for state used outside a keyed context (e.g. in ``open``), and
``StateMigrationException`` when state restored from a checkpoint or savepoint was written as
another kind of state (a value state now asked for as a list state, say) under the same name.
Values are pickled Python objects, so a changed ``type_info`` restores as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KeyedStateError",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "RuntimeContext",
    "StateDescriptor",
    "StateMigrationException",
    "TimeDomain",
    "TimerService",
    "ValueState",
    "ValueStateDescriptor",
]


class KeyedStateError(RuntimeError):
    """Keyed state or a timer used where no key is current."""


class StateMigrationException(KeyedStateError):
    """Restored keyed state does not fit the state the function registers under that name
    (Flink ``StateMigrationException``, raised when ``HeapKeyedStateBackend`` registers a
    restored state with an incompatible type). Restarting cannot fix it."""


@dataclass(frozen=True)
class StateDescriptor:
    name: str
    type_info: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a state descriptor needs a non-empty name, got {self.name!r}")


class ValueStateDescriptor(StateDescriptor):
    pass


class ListStateDescriptor(StateDescriptor):
    pass


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    value_type_info: Any = None


class TimeDomain:
    EVENT_TIME = "EVENT_TIME"
    PROCESSING_TIME = "PROCESSING_TIME"


class _KeyScope:
    """The current key's state values: ``{descriptor name: value}`` (set by the runtime)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] | None = None
        #: descriptor name -> state kind ("value" | "list" | "map") as the function registered it
        self.kinds: dict[str, str] = {}
        #: the kinds recorded with the current key's restored state
        self.restored_kinds: dict[str, str] = {}

    def load(self, values: dict[str, Any], kinds: dict[str, str]) -> None:
        """Make a key's stored state current; ``kinds``: what each name was when stored.

        Raises:
            StateMigrationException: a name the function registered was stored as another kind.
        """
        self.values, self.restored_kinds = dict(values), dict(kinds)
        for name, kind in self.kinds.items():
            self.check(name, kind)

    def check(self, name: str, kind: str) -> None:
        old = self.restored_kinds.get(name) or kind
        if old != kind:
            raise StateMigrationException(
                f"state '{name}' was restored as a {old} state, but the function now registers "
                f"it as a {kind} state (the state changed under the operator's uid). Restore with "
                "the program that took the savepoint, give the state a new name, or give the "
                "operator a new uid() to start it with empty state")

    def get(self, name: str, default: Any = None) -> Any:
        if self.values is None:
            raise KeyedStateError(f"state '{name}' used outside a keyed context (state can be "
                                  "read and written in process_element and on_timer, not in open)")
        return self.values.get(name, default)

    def set(self, name: str, value: Any) -> None:
        if self.values is None:
            raise KeyedStateError(f"state '{name}' used outside a keyed context")
        self.values[name] = value

    def delete(self, name: str) -> None:
        if self.values is None:
            raise KeyedStateError(f"state '{name}' used outside a keyed context")
        self.values.pop(name, None)


class ValueState:
    def __init__(self, scope: _KeyScope, name: str) -> None:
        self._scope, self._name = scope, name

    def value(self) -> Any:
        return self._scope.get(self._name)

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._scope.set(self._name, value)

    def clear(self) -> None:
        self._scope.delete(self._name)


class ListState:
    def __init__(self, scope: _KeyScope, name: str) -> None:
        self._scope, self._name = scope, name

    def get(self) -> list[Any]:
        return list(self._scope.get(self._name, ()))

    def add(self, value: Any) -> None:
        self._scope.set(self._name, [*self._scope.get(self._name, ()), value])

    def add_all(self, values: Iterable[Any]) -> None:
        self._scope.set(self._name, [*self._scope.get(self._name, ()), *values])

    def update(self, values: Iterable[Any]) -> None:
        values = list(values)
        if values:
            self._scope.set(self._name, values)
        else:
            self.clear()

    def clear(self) -> None:
        self._scope.delete(self._name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class MapState:
    def __init__(self, scope: _KeyScope, name: str) -> None:
        self._scope, self._name = scope, name

    def _map(self) -> dict[Any, Any]:
        return dict(self._scope.get(self._name, {}))

    def _store(self, m: dict[Any, Any]) -> None:
        if m:
            self._scope.set(self._name, m)
        else:
            self._scope.delete(self._name)

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        m = self._map()
        m[key] = value
        self._store(m)

    def put_all(self, items: dict[Any, Any]) -> None:
        m = self._map()
        m.update(items)
        self._store(m)

    def remove(self, key: Any) -> None:
        m = self._map()
        m.pop(key, None)
        self._store(m)

    def contains(self, key: Any) -> bool:
        return key in self._map()

    def keys(self) -> list[Any]:
        return list(self._map())

    def values(self) -> list[Any]:
        return list(self._map().values())

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._map().items())

    def is_empty(self) -> bool:
        return not self._map()

    def clear(self) -> None:
        self._scope.delete(self._name)


class RuntimeContext:
    """What ``open(runtime_context)`` gets: state handles and the subtask's place in the job."""

    def __init__(self, scope: _KeyScope, task_name: str = "", index: int = 0,
                 parallelism: int = 1) -> None:
        self._scope = scope
        self._task_name, self._index, self._parallelism = task_name, index, parallelism

    def _register(self, descriptor: StateDescriptor, kind: str) -> str:
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"expected a state descriptor, got {type(descriptor).__name__}")
        known = self._scope.kinds.setdefault(descriptor.name, kind)
        if known != kind:
            raise KeyedStateError(f"state '{descriptor.name}' is already a {known} state; "
                                  f"give the {kind} state another name")
        self._scope.check(descriptor.name, kind)
        return descriptor.name

    def get_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        return ValueState(self._scope, self._register(descriptor, "value"))

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        return ListState(self._scope, self._register(descriptor, "list"))

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        return MapState(self._scope, self._register(descriptor, "map"))

    def get_task_name(self) -> str:
        return self._task_name

    def get_index_of_this_subtask(self) -> int:
        return self._index

    def get_number_of_parallel_subtasks(self) -> int:
        return self._parallelism


class TimerService:
    """Timers of the current key, the current watermark and processing time (epoch ms)."""

    def __init__(self, watermark: int, processing_time: int) -> None:
        self.watermark = watermark
        self.processing_time = processing_time
        self.event_timers: set[int] | None = None
        self.processing_timers: set[int] | None = None

    def _timers(self, which: set[int] | None) -> set[int]:
        if which is None:
            raise KeyedStateError("timers can only be used in process_element and on_timer of a "
                                  "keyed stream (key_by(...).process(...))")
        return which

    def current_watermark(self) -> int:
        return self.watermark

    def current_processing_time(self) -> int:
        return self.processing_time

    def register_event_time_timer(self, timestamp: int) -> None:
        self._timers(self.event_timers).add(int(timestamp))

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._timers(self.processing_timers).add(int(timestamp))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._timers(self.event_timers).discard(int(timestamp))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._timers(self.processing_timers).discard(int(timestamp))
