"""flintlock: Apache Flink's runtime architecture in Python, with tasks running on Apache Spark.

Importing ``flintlock`` puts PySpark into Spark Connect mode (``SPARK_CONNECT_MODE_ENABLED=1``)
before anything imports pyspark, so ``F.col("x") > 3`` builds pure-Python, picklable Columns in
the client with no JVM. The public names below are imported lazily, so runtime processes that
import ``flintlock.runtime...`` do not pay for the API.

It also turns gRPC's fork handlers off (``GRPC_ENABLE_FORK_SUPPORT=false``, unless set) before
anything imports grpc. flintlock processes fork only to exec (the Spark JVM, programs), and with
the handlers on, a fork while gRPC threads are busy (a TaskManager launching its Spark JVM next to
its running RPC server) can break the parent's epoll poller ("epoll_wait error: Bad file
descriptor") and the JVM launch ("Java gateway process exited before sending its port number").
"""

from __future__ import annotations

import os

from flintlock._lazy import lazy_exports

os.environ.setdefault("SPARK_CONNECT_MODE_ENABLED", "1")
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__all__ = [
    "CheckpointingMode",
    "Configuration",
    "DataStream",
    "DataStreamSink",
    "FileSink",
    "FileSource",
    "JobClient",
    "JobExecutionResult",
    "KeyedStream",
    "RuntimeExecutionMode",
    "SlotSharingGroup",
    "StreamExecutionEnvironment",
]

_LAZY: dict[str, str] = {
    "CheckpointingMode": "flintlock.api.checkpoint_config",
    "Configuration": "flintlock.config",
    "DataStream": "flintlock.api.datastream",
    "DataStreamSink": "flintlock.api.datastream",
    "KeyedStream": "flintlock.api.datastream",
    "RuntimeExecutionMode": "flintlock.api.environment",
    "SlotSharingGroup": "flintlock.api.slot_sharing_group",
    "StreamExecutionEnvironment": "flintlock.api.environment",
    "JobClient": "flintlock.client.job_client",
    "JobExecutionResult": "flintlock.client.job_client",
    "FileSource": "flintlock.connectors.file",
    "FileSink": "flintlock.connectors.file",
}


__getattr__, __dir__ = lazy_exports('flintlock', globals(), _LAZY)
