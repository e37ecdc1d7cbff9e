"""The root of flintlock's exceptions."""

from __future__ import annotations

__all__ = ["FlintlockException"]


class FlintlockException(Exception):
    """Base class of every error flintlock raises on purpose."""
