"""The Spark data plane: the only package that imports pyspark (lazily, inside functions).

- ``session.SparkSessionProvider``: one Spark Connect session per TaskManager process.
- ``stream_task.SparkStreamTask``: the invokable running an operator chain
  (``flintlock.runtime.spark.stream_task:SparkStreamTask``).
- ``chain_translator``, ``python_ops``, ``partitions``, ``connector_io``: chain -> DataFrame plans,
  Arrow-based Python operators, result partition I/O, sources and sinks.
"""

from __future__ import annotations

__all__ = ["SparkSessionProvider", "SparkStreamTask"]


def __getattr__(name: str) -> object:
    if name == "SparkSessionProvider":
        from flintlock.runtime.spark.session import SparkSessionProvider

        return SparkSessionProvider
    if name == "SparkStreamTask":
        from flintlock.runtime.spark.stream_task import SparkStreamTask

        return SparkStreamTask
    raise AttributeError(name)
