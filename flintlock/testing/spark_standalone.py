"""A real Spark standalone cluster with a Spark Connect server, from pyspark's own scripts.

For tests and benchmarks that run flintlock's TaskManagers against a remote Spark
(``spark.remote: sc://127.0.0.1:<port>``), the way a production deployment points them at a Spark
cluster. Three JVMs, each started in its own process group from the installed pyspark package
(``SPARK_HOME``):

- master: ``bin/spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1``
- worker: ``bin/spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:<port>``
- Spark Connect server: ``bin/spark-submit --class ...SparkConnectServer --master spark://...``
  (what ``sbin/start-connect-server.sh`` runs, in the foreground so it can be supervised)

Everything binds 127.0.0.1 on free ports. Executors run Python UDFs with this interpreter
(``PYSPARK_PYTHON``), so flintlock and the program's modules import there as in the client. The
driver's REST API (``/api/v1/applications/<app>/jobs``, ``ui_url``) shows the server's Spark jobs.

    with SparkStandaloneCluster(work_dir) as spark:
        conf.set_string("spark.remote", spark.remote)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["SparkStandaloneCluster", "spark_home"]

_CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> Path:
    """The installed pyspark package, which is a complete ``SPARK_HOME`` (bin/, jars/, sbin/)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("pyspark is not installed")
    return Path(spec.origin).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


class SparkStandaloneCluster:
    """Master + one worker + a Spark Connect server; a context manager that stops all three.

    Args:
        work_dir: logs (``<name>.log``) and the worker's scratch space go here.
        worker_cores: cores the worker offers (default: all of this machine's).
        worker_memory: memory the worker offers (Spark size string).
        start_timeout_s: how long each JVM may take to listen on its port.

    Raises:
        RuntimeError: a JVM exited or did not listen in time (the message holds its log's tail).
    """

    def __init__(self, work_dir: str | os.PathLike[str], worker_cores: int | None = None,
                 worker_memory: str = "4g", start_timeout_s: float = 120.0) -> None:
        self.work_dir = Path(work_dir)
        self.worker_cores = worker_cores or os.cpu_count() or 1
        self.worker_memory = worker_memory
        self.start_timeout_s = start_timeout_s
        self.master_port = _free_port()
        self.connect_port = _free_port()
        self.ui_port = _free_port()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def remote(self) -> str:
        """The ``spark.remote`` value that reaches the Connect server."""
        return f"sc://127.0.0.1:{self.connect_port}"

    @property
    def ui_url(self) -> str:
        """The Connect server driver's web UI (and its ``/api/v1`` REST API)."""
        return f"http://127.0.0.1:{self.ui_port}"

    # ---- life cycle ------------------------------------------------------------------------------

    def start(self) -> SparkStandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        home = spark_home()
        try:
            self._spawn("master", [str(home / "bin" / "spark-class"),
                                   "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(self.master_port), "--webui-port",
                                   str(_free_port())], self.master_port)
            self._spawn("worker", [str(home / "bin" / "spark-class"),
                                   "org.apache.spark.deploy.worker.Worker", self.master_url,
                                   "--host", "127.0.0.1", "--cores", str(self.worker_cores),
                                   "--memory", self.worker_memory, "--webui-port",
                                   str(_free_port()), "--work-dir", str(self.work_dir / "work")],
                        None)
            self._wait_for_worker()
            conf = {
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(self.connect_port),
                "spark.ui.port": str(self.ui_port),
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
                "spark.sql.shuffle.partitions": str(self.worker_cores),
            }
            self._spawn("connect-server", [str(home / "bin" / "spark-submit"), "--class",
                                           _CONNECT_SERVER, "--master", self.master_url,
                                           *[a for k, v in conf.items() for a in ("--conf",
                                                                                  f"{k}={v}")],
                                           "--name", "flintlock-test-connect", "spark-internal"],
                        self.connect_port)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every process group (executors included), then SIGKILL survivors."""
        for proc in reversed(list(self._procs.values())):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self._procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self._procs.clear()

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ---- observation -----------------------------------------------------------------------------

    def active_jobs(self) -> list[dict[str, Any]]:
        """Spark jobs RUNNING on the Connect server's driver (its REST API), newest first."""
        apps = self._get_json("/api/v1/applications")
        jobs: list[dict[str, Any]] = []
        for app in apps:
            jobs += self._get_json(f"/api/v1/applications/{app['id']}/jobs?status=running")
        return jobs

    def log_tail(self, name: str, chars: int = 4000) -> str:
        path = self.work_dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def _get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.ui_url + path, timeout=10) as response:
            return json.loads(response.read())

    # ---- start-up helpers ------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str], port: int | None) -> None:
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        # the server is classic Spark, and it is not this process's embedded server: no Connect
        # mode, and not the token an embedded server put into this process's environment
        for var in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE",
                    "SPARK_CONNECT_AUTHENTICATE_TOKEN"):
            env.pop(var, None)
        log = (self.work_dir / f"{name}.log").open("wb")
        try:
            self._procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                 env=env, start_new_session=True)
        finally:
            log.close()
        if port is not None:
            self._wait(name, lambda: _port_open(port), f"listen on port {port}")

    def _wait_for_worker(self) -> None:
        def registered() -> bool:
            return "Successfully registered with master" in self.log_tail("worker", 100_000)

        self._wait("worker", registered, f"register with {self.master_url}")

    def _wait(self, name: str, condition: Any, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        proc = self._procs[name]
        while not condition():
            if proc.poll() is not None:
                raise RuntimeError(f"Spark {name} exited with code {proc.returncode} before it "
                                   f"could {what}:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark {name} did not {what} within {self.start_timeout_s:.0f}"
                                   f" s:\n{self.log_tail(name)}")
            time.sleep(0.1)
