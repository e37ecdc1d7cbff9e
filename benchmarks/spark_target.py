"""Which Spark the Spark-based systems use: each its own local Spark, or one shared remote Spark.

``--spark-remote`` of ``python -m benchmarks run``:

- not given (``None``): every system starts its own Spark, as users run them: flintlock's
  TaskManagers an embedded Spark Connect server each (``local[<cores>]``), plain PySpark a classic
  ``local[N]`` session in its process.
- ``sc://host:port``: a running Spark Connect server. flintlock's TaskManagers (session cluster and
  local mode) get ``-D spark.remote=<url>``; the plain-PySpark peers connect with
  ``SparkSession.builder.remote(url)`` (PySpark Connect). All of them then run on that Spark.
- ``standalone``: the harness starts a Spark standalone cluster for the run
  (``flintlock.testing.spark_standalone.SparkStandaloneCluster``: master, one worker offering
  ``cores`` cores, and a Spark Connect server, from pyspark's bundled scripts), uses its URL as
  above and stops it at the end.

DuckDB and PyFlink do not use Spark and run as always. ``describe()`` goes into the results
document (``"spark"``), from which the report says which Spark was used.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["STANDALONE", "SparkTarget", "check_spec", "start_spark"]

STANDALONE = "standalone"


def check_spec(spec: str) -> str:
    """``spec`` if it is ``standalone`` or a Spark Connect URL (``sc://host:port[/;params]``).

    Raises:
        ValueError: anything else, with the accepted forms.
    """
    spec = spec.strip()
    if spec == STANDALONE or (spec.startswith("sc://") and len(spec) > len("sc://")):
        return spec
    raise ValueError(f"{spec!r}: expected a Spark Connect URL (sc://host:port) or 'standalone'")


class SparkTarget:
    """The Spark of one benchmark run; ``remote`` is None when every system runs its own."""

    def __init__(self, mode: str, remote: str | None = None, cluster: Any = None,
                 info: dict[str, Any] | None = None) -> None:
        self.mode = mode  # "local", "remote" or "standalone"
        self.remote = remote
        self.cluster = cluster
        self.info = info or {}

    def describe(self) -> dict[str, Any]:
        """The results document's ``"spark"`` entry."""
        if self.remote is None:
            return {"mode": "local",
                    "flintlock": "an embedded Spark Connect server per TaskManager (local[cores])",
                    "pyspark": "classic PySpark, local[N] in the job's process"}
        return {"mode": self.mode, "remote": self.remote,
                "flintlock": f"TaskManagers with spark.remote={self.remote}",
                "pyspark": f"PySpark Connect, SparkSession.builder.remote({self.remote!r})",
                **self.info}

    def watch(self, sampler: Any) -> None:
        """Sample the standalone cluster's JVMs (the worker's tree holds the executors)."""
        procs = getattr(self.cluster, "_procs", None) or {}
        for name, proc in procs.items():
            sampler.watch(f"spark-standalone-{name}", proc.pid)

    def stop(self) -> None:
        """Stop the standalone cluster the harness started (nothing for the other modes)."""
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None


def start_spark(spec: str | None, work_dir: Path, cores: int,
                log: Callable[[str], None] = print) -> SparkTarget:
    """The Spark of a run (see the module doc); starts the standalone cluster for ``standalone``.

    Raises:
        RuntimeError: the standalone cluster did not come up (the message has the log tail).
    """
    if spec is None:
        return SparkTarget("local")
    if spec != STANDALONE:
        log(f"Spark: the Spark Connect server at {spec} (flintlock and plain PySpark)")
        return SparkTarget("remote", spec)
    from flintlock.testing.spark_standalone import SparkStandaloneCluster

    cluster = SparkStandaloneCluster(work_dir / "spark-standalone", worker_cores=cores)
    log(f"starting a Spark standalone cluster (1 worker, {cores} cores, "
        f"{cluster.worker_memory}) with a Spark Connect server")
    t0 = time.perf_counter()
    cluster.start()
    took = time.perf_counter() - t0
    log(f"  Spark standalone up in {took:.1f} s: {cluster.master_url}, Connect {cluster.remote}, "
        f"UI {cluster.ui_url}")
    info = {"master": cluster.master_url, "worker_cores": cluster.worker_cores,
            "worker_memory": cluster.worker_memory, "start_s": took}
    return SparkTarget(STANDALONE, cluster.remote, cluster, info)
