"""The DataStream API: environment, streams, user-function interfaces.

Names are imported lazily so that ``flintlock.api.exceptions`` / ``.transformations`` can be
imported by the compiler without pulling in the whole API.
"""

from __future__ import annotations

from flintlock._lazy import lazy_exports

__all__ = [
    "CheckpointConfig",
    "CheckpointingMode",
    "DataStream",
    "DataStreamSink",
    "ExternalizedCheckpointRetention",
    "FilterFunction",
    "FlatMapFunction",
    "InvalidProgramException",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "ReduceFunction",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "RuntimeExecutionMode",
    "SlotSharingGroup",
    "StreamExecutionEnvironment",
]

_LAZY: dict[str, str] = {
    "CheckpointConfig": "flintlock.api.checkpoint_config",
    "CheckpointingMode": "flintlock.api.checkpoint_config",
    "ExternalizedCheckpointRetention": "flintlock.api.checkpoint_config",
    "DataStream": "flintlock.api.datastream",
    "DataStreamSink": "flintlock.api.datastream",
    "KeyedStream": "flintlock.api.datastream",
    "RuntimeExecutionMode": "flintlock.api.environment",
    "SlotSharingGroup": "flintlock.api.slot_sharing_group",
    "StreamExecutionEnvironment": "flintlock.api.environment",
    "InvalidProgramException": "flintlock.api.exceptions",
    "FilterFunction": "flintlock.api.functions",
    "FlatMapFunction": "flintlock.api.functions",
    "KeyedProcessFunction": "flintlock.api.functions",
    "MapFunction": "flintlock.api.functions",
    "ReduceFunction": "flintlock.api.functions",
    "RestartStrategies": "flintlock.api.restart_strategy",
    "RestartStrategyConfiguration": "flintlock.api.restart_strategy",
}


__getattr__, __dir__ = lazy_exports('flintlock.api', globals(), _LAZY)
