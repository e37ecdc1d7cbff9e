"""ProcessResourceManagerDriver: workers are TaskManager processes on this host.

The local counterpart of Flink's ``KubernetesResourceManagerDriver`` / ``YarnResourceManagerDriver``.
Each worker is ``<python> -m flintlock -v taskmanager`` in its own session (process group, so
stopping it also ends its Spark JVM), configured through ``<work dir>/<resource id>/config.yaml``
(mode 0600; ``FLINTLOCK_CONF_DIR``): the JobManager's configuration, with the worker's
``taskmanager.resource-id``, slots and cores and the ResourceManager's RPC address, and
``taskmanager.spark.warm-up: false`` unless configured (it is started because a job waits for
its slots, and a warm-up plan would run beside that job's first tasks: TPC-H Q6 at SF 1 on an
application cluster finished 1-3 s later with it, and the warm-up itself took 6-9 s). The cluster
secret goes through the environment, never into a file or an argument list. Its stdout and stderr
go to ``<env.log.dir or work dir>/flintlock-taskmanager-<resource id>.out``.

A worker ends with the JobManager process even when that is killed
(``exit_with_parent``). Stopping sends SIGTERM to the worker's process group and SIGKILL after ``grace_s``; ``terminate``
stops all workers and waits for them, then removes the work directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from flintlock.config import Configuration
from flintlock.config.options import (
    JM_RPC_ADDRESS,
    JM_RPC_PORT,
    LOG_DIR,
    PROM_PORT,
    TM_SPARK_WARM_UP,
    parse_memory_bytes,
)
from flintlock.config.resource_manager_options import RM_PROCESS_PYTHON
from flintlock.config.sensitive import hide_credentials
from flintlock.runtime.entrypoint.common import SECRET_ENV, cluster_secret
from flintlock.runtime.ids import ResourceID
from flintlock.runtime.processes import PARENT_PID_ENV
from flintlock.runtime.resourcemanager.active.driver import ResourceEventHandler
from flintlock.runtime.resourcemanager.active.worker_tracker import WorkerResourceSpec
from flintlock.runtime.spark.jvm_status import driver_memory_for

__all__ = ["ProcessResourceManagerDriver"]

log = logging.getLogger(__name__)

#: keys a started TaskManager must not inherit from the JobManager's configuration
_JOB_MANAGER_ONLY = ("security.cluster.secret", "resourcemanager.type")


@dataclass
class _WorkerProcess:
    process: asyncio.subprocess.Process
    output: Path
    watcher: asyncio.Task[None] | None = None
    released: bool = False


class ProcessResourceManagerDriver:
    """Starts TaskManager processes on this host (implements ``ResourceManagerDriver``).

    Args:
        configuration: the JobManager's configuration, which the workers inherit.
        grace_s: how long a stopped worker may take before it is killed.
    """

    def __init__(self, configuration: Configuration, grace_s: float = 20.0) -> None:
        self._configuration = configuration
        self._grace_s = grace_s
        self._python = configuration.get(RM_PROCESS_PYTHON) or sys.executable
        self._work_dir = Path(tempfile.mkdtemp(prefix="flintlock-workers-"))
        configured_logs = configuration.get(LOG_DIR)
        self._output_dir = Path(configured_logs) if configured_logs else self._work_dir
        self._workers: dict[ResourceID, _WorkerProcess] = {}
        self._killers: set[asyncio.Task[None]] = set()
        self._handler: ResourceEventHandler | None = None
        self._rm_host = ""
        self._rm_port = 0

    async def initialize(self, handler: ResourceEventHandler, resource_manager_host: str,
                         resource_manager_port: int) -> None:
        self._handler = handler
        self._rm_host, self._rm_port = resource_manager_host, resource_manager_port

    def _worker_configuration(self, resource_id: ResourceID,
                              spec: WorkerResourceSpec) -> dict[str, str]:
        values = {k: v for k, v in self._configuration.to_dict().items()
                  if k not in _JOB_MANAGER_ONLY}
        values.update({
            "taskmanager.resource-id": str(resource_id),
            "taskmanager.numberOfTaskSlots": str(spec.number_of_slots),
            "taskmanager.cpu.cores": str(spec.cpu_cores),
            JM_RPC_ADDRESS.key: self._rm_host,
            JM_RPC_PORT.key: str(self._rm_port),
        })
        if not self._configuration.contains(TM_SPARK_WARM_UP):
            # a job waits for this worker's slots: a warm-up would compete with its first tasks
            values[TM_SPARK_WARM_UP.key] = "false"
        if self._configuration.get(PROM_PORT) is not None:
            values[PROM_PORT.key] = "0"  # the JobManager's fixed port is taken: any free one
        if spec.sized_memory:  # a worker for slots with memory: its Spark JVM holds them
            fraction = float(values.get("spark.memory.fraction", "0.6"))
            heap = driver_memory_for(spec.task_heap_memory, spec.managed_memory, fraction)
            current = values.get("spark.driver.memory")
            if current is None or parse_memory_bytes(current) < heap:
                values["spark.driver.memory"] = f"{-(-heap // (1024 * 1024))}m"
            if spec.task_off_heap_memory:
                values["spark.memory.offHeap.enabled"] = "true"
                values["spark.memory.offHeap.size"] = str(spec.task_off_heap_memory)
        return values

    async def request_resource(self, resource_id: ResourceID, spec: WorkerResourceSpec) -> None:
        if resource_id in self._workers:
            raise ValueError(f"worker {resource_id} already exists")
        conf_dir = self._work_dir / str(resource_id)
        conf_dir.mkdir(parents=True)
        config_file = conf_dir / "config.yaml"
        config_file.touch(mode=0o600)
        config_file.write_text(yaml.safe_dump(self._worker_configuration(resource_id, spec)))
        self._output_dir.mkdir(parents=True, exist_ok=True)
        output = self._output_dir / f"flintlock-taskmanager-{resource_id}.out"
        env = {**os.environ, "FLINTLOCK_CONF_DIR": str(conf_dir), "PYTHONUNBUFFERED": "1",
               PARENT_PID_ENV: str(os.getpid())}  # it ends if this JobManager is killed
        env.pop("FLINK_CONF_DIR", None)
        secret = cluster_secret(self._configuration)
        if secret:
            env[SECRET_ENV] = secret
        with open(output, "ab") as out:
            process = await asyncio.create_subprocess_exec(
                self._python, "-m", "flintlock", "-v", "taskmanager",
                stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=asyncio.subprocess.STDOUT,
                env=env, start_new_session=True)
        worker = _WorkerProcess(process, output)
        self._workers[resource_id] = worker
        worker.watcher = asyncio.create_task(self._watch(resource_id, worker),
                                             name=f"watch-{resource_id}")
        log.info("Started TaskManager process %s (pid %d, %d slot(s), %d core(s)); output in %s",
                 resource_id, process.pid, spec.number_of_slots, spec.cpu_cores, output)

    async def _watch(self, resource_id: ResourceID, worker: _WorkerProcess) -> None:
        code = await worker.process.wait()
        self._workers.pop(resource_id, None)
        how = "stopped" if worker.released else "exited"
        diagnostics = f"TaskManager process {worker.process.pid} {how} with code {code}"
        if not worker.released:
            tail = _tail(worker.output)
            diagnostics += f"; see {worker.output}" + (f": {tail}" if tail else "")
            log.warning("%s", diagnostics)
        if self._handler is not None:
            self._handler.on_worker_terminated(resource_id, diagnostics)

    async def release_resource(self, resource_id: ResourceID) -> None:
        worker = self._workers.get(resource_id)
        if worker is None or worker.released:
            return
        worker.released = True
        _signal_group(worker.process.pid, signal.SIGTERM)
        killer = asyncio.create_task(self._kill_after_grace(worker), name=f"kill-{resource_id}")
        self._killers.add(killer)  # referenced until done (the loop keeps weak references only)
        killer.add_done_callback(self._killers.discard)

    async def _kill_after_grace(self, worker: _WorkerProcess) -> None:
        try:
            await asyncio.wait_for(worker.process.wait(), self._grace_s)
        except asyncio.TimeoutError:
            log.warning("TaskManager process %d did not stop within %.0f s; killing it",
                        worker.process.pid, self._grace_s)
        _signal_group(worker.process.pid, signal.SIGKILL)  # its Spark JVM too, if left

    async def terminate(self) -> None:
        workers = list(self._workers.items())
        for resource_id, _ in workers:
            await self.release_resource(resource_id)
        watchers = [w.watcher for _, w in workers if w.watcher is not None]
        if watchers:
            done, _ = await asyncio.wait(watchers, timeout=self._grace_s + 5)
            if len(done) < len(watchers):
                log.warning("%d TaskManager process(es) did not end", len(watchers) - len(done))
        for _, worker in workers:
            _signal_group(worker.process.pid, signal.SIGKILL)
        shutil.rmtree(self._work_dir, ignore_errors=True)

    def describe(self, resource_id: ResourceID) -> dict[str, str]:
        worker = self._workers.get(resource_id)
        if worker is None:
            return {}
        return {"pid": str(worker.process.pid), "output": str(worker.output)}

    @property
    def running(self) -> list[ResourceID]:
        """Workers whose process has not ended yet."""
        return list(self._workers)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _tail(path: Path, lines: int = 3, max_bytes: int = 4096) -> str:
    """The last non-empty ``lines`` of a worker's output (credentials hidden)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return hide_credentials(" | ".join(kept))
