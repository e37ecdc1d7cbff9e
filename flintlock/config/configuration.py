"""Configuration: validated Flink keys from ``config.yaml``, the program and ``-D key=value``.

Precedence (lowest first): option defaults, ``$FLINTLOCK_CONF_DIR/config.yaml`` (or
``$FLINK_CONF_DIR``), the program's ``Configuration``, command-line ``-D`` overrides. Every key is
checked when set: an unknown key or a bad value raises ``IllegalConfigurationException`` naming the
key, the value and what was expected. Nested YAML mappings are flattened with dots, as Flink does.
There is no global configuration object: components receive a ``Configuration``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from flintlock.config.options import OPTIONS, ConfigOption
from flintlock.config.sensitive import (
    HIDDEN_CONTENT,
    hidden_items,
    hide_credentials,
    hide_value,
    is_sensitive,
)
from flintlock.exceptions import FlintlockException

__all__ = ["Configuration", "IllegalConfigurationException", "load_cluster_configuration"]

T = TypeVar("T")

_DEPRECATED: dict[str, str] = {
    old: opt.key for opt in OPTIONS.values() for old in opt.deprecated_keys
}
_PASSTHROUGH_PREFIXES = ("spark.", "env.", "$internal.")


class IllegalConfigurationException(FlintlockException):
    """A configuration key is unknown or its value is invalid."""


def _canonical_key(key: str) -> str:
    key = key.strip()
    return _DEPRECATED.get(key, key)


def _check(key: str, value: Any) -> Any:
    if key.startswith(_PASSTHROUGH_PREFIXES):
        return str(value)
    opt = OPTIONS.get(key)
    if opt is None:
        close = difflib.get_close_matches(key, OPTIONS.keys(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise IllegalConfigurationException(f"Unknown configuration key {key!r}.{hint}")
    if value is None:
        return None
    try:
        return opt.parse(value)
    except ValueError as exc:
        shown = hide_value(key, repr(value))
        reason = HIDDEN_CONTENT if is_sensitive(key) else hide_credentials(str(exc))
        raise IllegalConfigurationException(
            f"Invalid value {shown} for configuration key {key!r}: {reason}. ({opt.description})"
        ) from None


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


class Configuration:
    """A set of validated settings, read with typed ``get(option)``.

    Values are stored as given (strings from YAML/``-D``) after validation; ``get`` returns the
    parsed value (seconds for durations), ``to_dict`` the given text form for shipping to tasks.
    """

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._raw: dict[str, Any] = {}
        if values:
            for key, value in values.items():
                self.set_string(key, value)

    def set_string(self, key: str, value: Any) -> Configuration:
        key = _canonical_key(key)
        _check(key, value)
        self._raw[key] = value
        return self

    def set(self, option: ConfigOption[Any], value: Any) -> Configuration:
        return self.set_string(option.key, value)

    def get(self, option: ConfigOption[T]) -> T:
        if option.key in self._raw and self._raw[option.key] is not None:
            return option.parse(self._raw[option.key])
        return option.default  # type: ignore[return-value]

    def contains(self, option: ConfigOption[Any]) -> bool:
        return option.key in self._raw

    def get_raw(self, key: str, default: Any = None) -> Any:
        return self._raw.get(_canonical_key(key), default)

    def add_all(self, other: Configuration | Mapping[str, Any]) -> Configuration:
        items = other.to_dict() if isinstance(other, Configuration) else other
        for k, v in items.items():
            self.set_string(k, v)
        return self

    def copy(self) -> Configuration:
        c = Configuration()
        c._raw = dict(self._raw)
        return c

    def to_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in self._raw.items() if v is not None}

    def spark_settings(self) -> dict[str, str]:
        """The ``spark.*`` keys (minus ``spark.remote``) for the TaskManagers' Spark sessions."""
        return {k: str(v) for k, v in self._raw.items() if k.startswith("spark.") and k != "spark.remote"}

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __repr__(self) -> str:
        return f"Configuration({hidden_items(self._raw)!r})"

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> Configuration:
        """Read a Flink ``config.yaml`` (nested or flat keys).

        Raises:
            IllegalConfigurationException: unreadable file, bad YAML, unknown key or bad value.
        """
        import yaml

        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except OSError as exc:
            raise IllegalConfigurationException(f"Cannot read configuration file {p}: {exc}") from None
        except yaml.YAMLError as exc:
            raise IllegalConfigurationException(f"Invalid YAML in {p}: {exc}") from None
        if not isinstance(data, Mapping):
            raise IllegalConfigurationException(f"{p}: expected a mapping of keys to values")
        flat: dict[str, Any] = {}
        _flatten("", data, flat)
        try:
            return cls(flat)
        except IllegalConfigurationException as exc:
            raise IllegalConfigurationException(f"{p}: {exc}") from None

    @classmethod
    def from_dynamic_properties(cls, items: Iterable[str]) -> Configuration:
        """Parse ``-D key=value`` strings."""
        conf = cls()
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise IllegalConfigurationException(
                    f"Invalid dynamic property {item!r}: expected key=value"
                )
            conf.set_string(key.strip(), value.strip())
        return conf


def load_cluster_configuration(conf_dir: str | None = None) -> Configuration:
    """Defaults overlaid with ``config.yaml`` from ``conf_dir``, ``$FLINTLOCK_CONF_DIR``,
    or ``$FLINK_CONF_DIR`` (the first that has one); empty when there is none."""
    candidates = [conf_dir, os.environ.get("FLINTLOCK_CONF_DIR"), os.environ.get("FLINK_CONF_DIR")]
    for d in candidates:
        if d:
            path = Path(d) / "config.yaml"
            if path.exists():
                return Configuration.from_yaml(path)
            if conf_dir is not None and d == conf_dir:
                raise IllegalConfigurationException(f"No config.yaml in {d}")
    return Configuration()
