"""The DataStream API: environment, streams, user-function interfaces.

Names are imported lazily so that ``flintlock.api.exceptions`` / ``.transformations`` can be
imported by the compiler without pulling in the whole API.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DataStream",
    "DataStreamSink",
    "FilterFunction",
    "FlatMapFunction",
    "InvalidProgramException",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "ReduceFunction",
    "RuntimeExecutionMode",
    "StreamExecutionEnvironment",
]

_LAZY: dict[str, str] = {
    "DataStream": "flintlock.api.datastream",
    "DataStreamSink": "flintlock.api.datastream",
    "KeyedStream": "flintlock.api.datastream",
    "RuntimeExecutionMode": "flintlock.api.environment",
    "StreamExecutionEnvironment": "flintlock.api.environment",
    "InvalidProgramException": "flintlock.api.exceptions",
    "FilterFunction": "flintlock.api.functions",
    "FlatMapFunction": "flintlock.api.functions",
    "KeyedProcessFunction": "flintlock.api.functions",
    "MapFunction": "flintlock.api.functions",
    "ReduceFunction": "flintlock.api.functions",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'flintlock.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
