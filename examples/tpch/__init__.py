"""TPC-H queries written with the flintlock DataStream API (``build(env, data_dir)`` each)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

QUERY_NAMES = (
    "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11",
    "q12", "q13", "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22",
)


def builder(name: str) -> Callable[[Any, str], Any]:
    """The ``build(env, data_dir)`` function of query ``name`` (``"q1"`` ...)."""
    return importlib.import_module(f"examples.tpch.{name}").build
