"""TPC-H queries written with the flintlock DataStream API (``build(env, data_dir)`` each)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

QUERY_NAMES = ("q1", "q3", "q5", "q6", "q10", "q12", "q18")


def builder(name: str) -> Callable[[Any, str], Any]:
    """The ``build(env, data_dir)`` function of query ``name`` (``"q1"`` ...)."""
    return importlib.import_module(f"examples.tpch.{name}").build
