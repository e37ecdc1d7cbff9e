"""Replies shared by all gateways."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ACK", "Acknowledge"]


@dataclass(frozen=True)
class Acknowledge:
    """The reply of a request that returns nothing else (Flink ``Acknowledge``)."""


ACK = Acknowledge()
