"""Configuration: Flink's keys, validated (``Configuration``, ``ConfigOption``)."""

from __future__ import annotations

from flintlock.config.configuration import (
    Configuration,
    IllegalConfigurationException,
    load_cluster_configuration,
)
from flintlock.config.options import OPTIONS, ConfigOption

__all__ = [
    "OPTIONS",
    "ConfigOption",
    "Configuration",
    "IllegalConfigurationException",
    "load_cluster_configuration",
]
