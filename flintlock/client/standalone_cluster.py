"""``flintlock cluster start|stop``: a standalone session cluster on this machine.

Like Flink's ``start-cluster.sh`` / ``stop-cluster.sh``: one JobManager (or several, one leading
and the others standing by, with high availability) and N TaskManagers as background processes.
Everything lives in the state directory (``cluster.state-dir``, default
``~/.flintlock/cluster``): ``<name>.pid``, ``<name>.port`` (JSON with the bound ports), ``log/<name>.log``
and ``secret`` (mode 0600; the cluster secret, generated when ``security.cluster.secret`` is unset).
Each daemon runs in its own session (process group), so ``stop`` also ends its Spark JVM.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flintlock.client.local_zookeeper import LocalZooKeeperException, start_local_zookeeper
from flintlock.client.remote import cluster_state_dir
from flintlock.client.rest_cluster_client import RestClusterClient
from flintlock.client.secret_file import read_secret_file, write_secret_file
from flintlock.config import Configuration
from flintlock.config.options import (
    CLUSTER_SECRET,
    HA_STORAGE_DIR,
    HA_TYPE,
    LOG_DIR,
    OPTIONS,
    TM_CPU_CORES,
)
from flintlock.exceptions import FlintlockException
from flintlock.runtime.entrypoint.common import SECRET_ENV
from flintlock.runtime.highavailability.services import (
    HighAvailabilityConfigurationException,
    HighAvailabilityServices,
    create_ha_services,
)
from flintlock.runtime.net.ssl_utils import rest_client_ssl_context
from flintlock.runtime.processes import pid_alive, process_group_alive

#: in the state directory: the high-availability settings with which clients find the leader
HA_SETTINGS_FILE = "ha.json"

__all__ = [
    "HA_SETTINGS_FILE",
    "ClusterInfo",
    "StandaloneClusterException",
    "cluster_ha_services",
    "leader_rest_endpoint",
    "running_cluster_rest_port",
    "start_cluster",
    "stop_cluster",
]


class StandaloneClusterException(FlintlockException):
    """The cluster could not be started or stopped; the message says why and where the logs are."""


@dataclass(frozen=True)
class ClusterInfo:
    state_dir: Path
    rest_port: int
    rpc_port: int
    task_managers: int
    job_managers: int = 1


#: the pid file name (``<state>/zookeeper.pid``) of a ZooKeeper started by ``--zookeeper``
LOCAL_ZOOKEEPER = "zookeeper"


def _daemon_args(configuration: Configuration, dynamic: list[str], state: Path) -> list[str]:
    """The ``-D`` arguments of every daemon: ``dynamic``, and unless configured, logs kept with
    the cluster's state (served by REST, kept after stop)."""
    d_args = [a for item in dynamic for a in ("-D", item)]
    if configuration.get(LOG_DIR) is None and not any(d.startswith("env.log.dir=") for d in dynamic):
        d_args += ["-D", f"env.log.dir={state / 'log'}"]
    return d_args


def _pid_files(state: Path) -> list[Path]:
    return sorted(state.glob("*.pid"))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _ensure_secret(state: Path, configuration: Configuration) -> str:
    configured = configuration.get(CLUSTER_SECRET)
    if configured:
        return str(configured)
    value = secrets.token_hex(32)
    write_secret_file(state / "secret", value)
    return value


def _spawn(name: str, args: list[str], state: Path, secret: str) -> subprocess.Popen[bytes]:
    log_dir = state / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = open(log_dir / f"{name}.log", "ab")
    env = {**os.environ, SECRET_ENV: secret, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flintlock", "-v", *args, "--port-file", str(state / f"{name}.port")],
        stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        start_new_session=True,
    )
    log_file.close()
    (state / f"{name}.pid").write_text(str(proc.pid))
    return proc


def _wait_for_port_file(name: str, proc: subprocess.Popen[bytes], state: Path,
                        timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    path = state / f"{name}.port"
    while time.monotonic() < deadline:
        data = _read_json(path)
        if data is not None:
            return data
        if proc.poll() is not None:
            raise StandaloneClusterException(
                f"{name} exited with code {proc.returncode} during start-up; see "
                f"{state / 'log' / (name + '.log')}"
            )
        time.sleep(0.05)
    raise StandaloneClusterException(
        f"{name} did not come up within {timeout_s:.0f} s; see {state / 'log' / (name + '.log')}"
    )


def _cpu_share(configuration: Configuration, task_managers: int) -> list[str]:
    """``-D taskmanager.cpu.cores=<cores / N>`` for N TaskManagers on this host, so their embedded
    Spark servers together run as many task threads as the host has cores (never oversubscribed);
    nothing when the cores are configured or the TaskManagers use a remote Spark."""
    if (configuration.contains(TM_CPU_CORES) or configuration.get_raw("spark.remote")
            or task_managers < 1):
        return []
    return ["-D", f"taskmanager.cpu.cores={max(1, (os.cpu_count() or 1) // task_managers)}"]


def _high_availability(configuration: Configuration, dynamic: list[str], state: Path,
                       job_managers: int) -> tuple[list[str], dict[str, str] | None]:
    """The ``-D`` settings several JobManagers need, and the high-availability settings
    clients use to find the leader (None without high availability). With more than one
    JobManager and no ``high-availability.type``, FILE high availability under ``<state>/ha``
    is configured; several JobManagers bind any free RPC port (TaskManagers find the
    leader's)."""
    extra: list[str] = []
    if job_managers > 1 and configuration.get(HA_TYPE) == "NONE":
        extra += ["-D", "high-availability.type=FILE",
                  "-D", f"high-availability.storageDir={state / 'ha'}"]
    if job_managers > 1 and not any(d.startswith("jobmanager.rpc.port=") for d in dynamic):
        extra += ["-D", "jobmanager.rpc.port=0"]
    effective = configuration.copy().add_all(dict(
        extra[i + 1].split("=", 1) for i in range(0, len(extra), 2)))
    try:
        ha = create_ha_services(effective)
        if ha is not None:
            ha.check_storage()
    except HighAvailabilityConfigurationException as exc:
        raise StandaloneClusterException(str(exc)) from None
    if ha is None:
        return extra, None
    settings = {key: str(effective.get_raw(key)) for key in _HA_KEYS
                if effective.contains(OPTIONS[key])}
    return extra, settings


#: the settings a client needs to find the leader of a cluster started with high availability
_HA_KEYS = ("high-availability.type", "high-availability.storageDir",
            "high-availability.cluster-id", "high-availability.zookeeper.quorum",
            "high-availability.zookeeper.path.root",
            "high-availability.zookeeper.client.session-timeout",
            "high-availability.zookeeper.client.connection-timeout",
            "high-availability.zookeeper.client.retry-wait",
            "high-availability.zookeeper.client.max-retry-attempts")


def _leader_rest(ha: HighAvailabilityServices) -> tuple[str, int] | None:
    """(host, port) of the leading JobManager's REST server (None while none leads)."""
    leader = ha.current_leader()
    return leader.rest_endpoint() if leader is not None else None


def _wait_for_leader(settings: dict[str, str], started: list[tuple[str, subprocess.Popen[bytes]]],
                     state: Path, timeout_s: float) -> tuple[str, int]:
    """(host, port) of the leading JobManager's REST server, once one leads."""
    ha = create_ha_services(Configuration(settings))
    assert ha is not None
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            endpoint = _leader_rest(ha)
            if endpoint is not None:
                return endpoint
            if all(proc.poll() is not None for _, proc in started):
                raise StandaloneClusterException(
                    f"every JobManager exited during start-up; see the logs in {state / 'log'}")
            time.sleep(0.1)
    finally:
        ha.close()
    raise StandaloneClusterException(
        f"no JobManager became the leader within {timeout_s:.0f} s; see the logs in "
        f"{state / 'log'}")


def start_cluster(configuration: Configuration, dynamic: list[str], task_managers: int,
                  timeout_s: float = 180.0, job_managers: int = 1,
                  zookeeper: bool = False) -> ClusterInfo:
    """Start ``job_managers`` JobManagers (one leads, the others stand by; more than one needs
    high availability, which defaults to FILE under the state directory) and ``task_managers``
    TaskManagers; return once all TaskManagers registered at the leader. With ``zookeeper``, a
    local ZooKeeper server is started first (``local_zookeeper``) and the cluster uses it
    (``high-availability.type: ZOOKEEPER``, storage under ``<state>/ha`` unless configured).

    Raises:
        StandaloneClusterException: a cluster is already running from this state directory, a
            process died during start-up, the high-availability settings are incomplete, or
            the TaskManagers did not register in time.
    """
    state = cluster_state_dir(configuration)
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    running = [p for p in _pid_files(state) if (pid := _read_pid(p)) and pid_alive(pid)]
    if running:
        raise StandaloneClusterException(
            f"A cluster is already running from {state} ({', '.join(p.stem for p in running)}); "
            "stop it with `flintlock cluster stop`."
        )
    for stale in list(state.glob("*.pid")) + list(state.glob("*.port")):
        stale.unlink(missing_ok=True)
    secret = _ensure_secret(state, configuration)
    if zookeeper:
        try:
            quorum = start_local_zookeeper(state)
        except LocalZooKeeperException as exc:
            _terminate(state)
            raise StandaloneClusterException(str(exc)) from None
        local = {"high-availability.type": "ZOOKEEPER",
                 "high-availability.zookeeper.quorum": quorum}
        if not configuration.get(HA_STORAGE_DIR):
            local["high-availability.storageDir"] = str(state / "ha")
        configuration = configuration.copy().add_all(local)
        dynamic = [*dynamic, *(f"{k}={v}" for k, v in local.items())]
    d_args = _daemon_args(configuration, dynamic, state)
    ha_args, ha_settings = _high_availability(configuration, dynamic, state, job_managers)
    d_args += ha_args
    (state / HA_SETTINGS_FILE).unlink(missing_ok=True)
    started: list[subprocess.Popen[bytes]] = []
    try:
        masters = [(name, _spawn(name, ["jobmanager", *d_args], state, secret))
                   for name in _job_manager_names(job_managers)]
        started += [proc for _, proc in masters]
        if ha_settings is None:
            ports = _wait_for_port_file("jobmanager", masters[0][1], state, 60)
            host, rest_port = "127.0.0.1", int(ports["rest_port"])
            tm_args = [*d_args, "-D", f"jobmanager.rpc.port={ports['rpc_port']}"]
        else:  # TaskManagers and clients follow the leader
            (state / HA_SETTINGS_FILE).write_text(json.dumps(ha_settings))
            host, rest_port = _wait_for_leader(ha_settings, masters, state, 60)
            ports = {"rpc_port": 0, "rest_port": rest_port}
            tm_args = list(d_args)
        tm_args += _cpu_share(configuration, task_managers)
        for i in range(task_managers):
            started.append(_spawn(f"taskmanager-{i}", ["taskmanager", *tm_args], state, secret))
        client = RestClusterClient(host, rest_port, secret,
                                   ssl_context=rest_client_ssl_context(configuration))
        deadline = time.monotonic() + timeout_s
        registered = 0
        while time.monotonic() < deadline:
            for i, proc in enumerate(started[job_managers:]):
                if proc.poll() is not None:
                    raise StandaloneClusterException(
                        f"taskmanager-{i} exited with code {proc.returncode}; see "
                        f"{state / 'log' / f'taskmanager-{i}.log'}"
                    )
            registered = int(client.overview().get("taskmanagers", 0))
            if registered >= task_managers:
                break
            time.sleep(0.2)
        else:
            raise StandaloneClusterException(
                f"only {registered} of {task_managers} TaskManagers registered within "
                f"{timeout_s:.0f} s; see the logs in {state / 'log'}"
            )
        client.close()
    except BaseException:
        _terminate(state)
        raise
    return ClusterInfo(state, rest_port, int(ports["rpc_port"]), task_managers, job_managers)


def add_job_manager(configuration: Configuration, dynamic: list[str]) -> str:
    """Start one more JobManager for the high-availability cluster running from the state
    directory (a standby, or the leader if none leads; Flink's ``jobmanager.sh start``), e.g.
    to replace a crashed one. ``dynamic`` should be the ``-D`` settings the cluster was started
    with. Returns its name (``jobmanager-<n>``); ``cluster stop`` stops it with the others.

    Raises:
        StandaloneClusterException: no cluster with high availability runs from the state
            directory, or the JobManager exited during start-up.
    """
    state = cluster_state_dir(configuration)
    running = [p for p in state.glob("jobmanager*.pid") if (pid := _read_pid(p)) and pid_alive(pid)]
    if not running or not (state / HA_SETTINGS_FILE).exists():
        raise StandaloneClusterException(
            f"no cluster with high availability runs from {state}; start one with "
            "`flintlock cluster start --jobmanagers 2`")
    # the cluster's HA settings as it was started (also those --zookeeper chose)
    settings = json.loads((state / HA_SETTINGS_FILE).read_text())
    configuration = configuration.copy().add_all(settings)
    dynamic = [*dynamic, *(f"{k}={v}" for k, v in settings.items())]
    d_args = _daemon_args(configuration, dynamic, state)
    d_args += _high_availability(configuration, dynamic, state, 2)[0]
    taken = {p.stem for p in state.glob("jobmanager*.pid")}
    name = next(n for n in (f"jobmanager-{i}" for i in range(1, 10_000)) if n not in taken)
    secret = configuration.get(CLUSTER_SECRET) or read_secret_file(state / "secret")
    if not secret:
        raise StandaloneClusterException(
            f"{state} holds no cluster secret: start the cluster with `flintlock cluster start` "
            "first, or set security.cluster.secret.")
    proc = _spawn(name, ["jobmanager", *d_args], state, str(secret))
    _wait_for_port_file(name, proc, state, 60)
    return name


def add_task_manager(configuration: Configuration, dynamic: list[str],
                     timeout_s: float = 180.0) -> str:
    """Start one more TaskManager for the cluster running from the state directory (Flink's
    ``taskmanager.sh start``); ``dynamic`` are its ``-D`` settings (with those the cluster was
    started with, for the same state directory and security). Returns its name
    (``taskmanager-<n>``) once it registered; ``cluster stop`` stops it with the others.

    Raises:
        StandaloneClusterException: no cluster runs from the state directory, or the
            TaskManager exited during start-up or did not register within ``timeout_s``.
    """
    state = cluster_state_dir(configuration)
    rest_port = running_cluster_rest_port(state)
    if rest_port is None:
        raise StandaloneClusterException(
            f"no cluster runs from {state}; start one with `flintlock cluster start`")
    d_args = _daemon_args(configuration, dynamic, state)
    settings = _read_json(state / HA_SETTINGS_FILE)
    if settings:  # it follows the leader, as the cluster's TaskManagers do
        d_args += [a for k, v in settings.items() for a in ("-D", f"{k}={v}")]
    else:
        ports = _read_json(state / "jobmanager.port") or {}
        d_args += ["-D", f"jobmanager.rpc.port={ports.get('rpc_port', 0)}"]
    secret = configuration.get(CLUSTER_SECRET) or read_secret_file(state / "secret")
    if not secret:
        raise StandaloneClusterException(
            f"{state} holds no cluster secret: start the cluster with `flintlock cluster start` "
            "first, or set security.cluster.secret.")
    client = RestClusterClient("127.0.0.1", rest_port, str(secret),
                               ssl_context=rest_client_ssl_context(configuration))
    try:
        before = int(client.overview().get("taskmanagers", 0))
        taken = {p.stem for p in state.glob("taskmanager-*.pid")}
        name = next(n for n in (f"taskmanager-{i}" for i in range(10_000)) if n not in taken)
        proc = _spawn(name, ["taskmanager", *d_args], state, str(secret))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StandaloneClusterException(
                    f"{name} exited with code {proc.returncode}; see {state / 'log' / (name + '.log')}")
            if int(client.overview().get("taskmanagers", 0)) > before:
                return name
            time.sleep(0.2)
    finally:
        client.close()
    raise StandaloneClusterException(
        f"{name} did not register within {timeout_s:.0f} s; see {state / 'log' / (name + '.log')}")


def _job_manager_names(n: int) -> list[str]:
    """``jobmanager`` (the first, as without high availability), ``jobmanager-1``, ..."""
    return ["jobmanager", *(f"jobmanager-{i}" for i in range(1, n))]


def cluster_ha_services(state: Path) -> HighAvailabilityServices | None:
    """The high-availability services of a cluster started from ``state`` with several
    JobManagers (its ``ha.json``), else None."""
    settings = _read_json(state / HA_SETTINGS_FILE)
    if not settings:
        return None
    return create_ha_services(Configuration({str(k): str(v) for k, v in settings.items()}))


def leader_rest_endpoint(state: Path) -> tuple[str, int] | None:
    """(host, port) of the leading JobManager's REST server of a cluster started from ``state``
    with high availability, else None."""
    try:
        ha = cluster_ha_services(state)
        if ha is None:
            return None
        try:
            return _leader_rest(ha)
        finally:
            ha.close()
    except FlintlockException:  # e.g. ZooKeeper unreachable
        return None


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def running_cluster_rest_port(state: Path) -> int | None:
    """The REST port of the (leading) JobManager started from ``state`` when it is still running
    (a live pid in ``jobmanager.pid`` and a readable ``jobmanager.port``, or with high
    availability a live JobManager and the leader's file), else ``None``."""
    if (state / HA_SETTINGS_FILE).exists():
        alive = any((pid := _read_pid(p)) and pid_alive(pid) for p in state.glob("jobmanager*.pid"))
        endpoint = leader_rest_endpoint(state) if alive else None
        return endpoint[1] if endpoint else None
    pid = _read_pid(state / "jobmanager.pid")
    ports = _read_json(state / "jobmanager.port") if pid and pid_alive(pid) else None
    try:
        return int(ports["rest_port"]) if ports else None
    except (KeyError, TypeError, ValueError):
        return None


def _terminate(state: Path, grace_s: float = 30.0) -> list[str]:
    """SIGTERM every daemon's process group (TaskManagers first), SIGKILL after ``grace_s``;
    a local ZooKeeper (``--zookeeper``) last, once the JobManagers left it."""
    pid_files = sorted(_pid_files(state), key=lambda p: p.stem.startswith("jobmanager"))
    zookeeper = [p for p in pid_files if p.stem == LOCAL_ZOOKEEPER]
    others = [p for p in pid_files if p.stem != LOCAL_ZOOKEEPER]
    return _terminate_daemons(state, others, grace_s) + _terminate_daemons(state, zookeeper,
                                                                           grace_s)


def _terminate_daemons(state: Path, pid_files: list[Path], grace_s: float) -> list[str]:
    stopped = []
    for path in pid_files:
        pid = _read_pid(path)
        if pid and pid_alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            stopped.append(path.stem)
    deadline = time.monotonic() + grace_s
    for path in pid_files:
        pid = _read_pid(path)
        while pid and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)  # survivors, and any child left in the group
            except ProcessLookupError:
                pass
            _await_group_end(pid)
        path.unlink(missing_ok=True)
        (state / f"{path.stem}.port").unlink(missing_ok=True)
    return stopped


#: how long (s) ``cluster stop`` waits for a killed daemon's process group to end (a Spark
#: server's JVM takes a moment to exit after SIGKILL)
GROUP_END_WAIT_S = 10.0


def _await_group_end(pgid: int, wait_s: float = GROUP_END_WAIT_S) -> bool:
    """Poll until no process of group ``pgid`` runs (``process_group_alive``), for at most
    ``wait_s``; returns whether the group ended, so that a stopped cluster leaves no process
    behind when ``stop_cluster`` returns."""
    deadline = time.monotonic() + wait_s
    while process_group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_cluster(configuration: Configuration) -> list[str]:
    """Stop the cluster started from the state directory; returns the names of stopped daemons."""
    return _terminate(cluster_state_dir(configuration))
