"""``flintlock run --target application``: a cluster of its own for one program.

Flink's application mode (``flink run --target <x>-application``, fact sheet 10): the client starts
a JobManager process that runs the program's main() itself (``flintlock application-cluster``,
``flintlock.client.application``), with an active ResourceManager that starts TaskManager
processes as the program's jobs need slots and stops them when idle. The cluster ends when the
application does; nothing is left behind.

Everything of one application lives in ``<cluster.state-dir>/applications/<application id>/``:
``jobmanager.pid``, ``jobmanager.port`` (its REST port), ``secret`` (0600, generated unless
``security.cluster.secret`` is set) and ``log/`` (the JobManager's and TaskManagers' logs, kept
after the application ended).

- **attached** (default): the JobManager's output (the program's prints, errors) shows in this
  terminal; the command returns the application's status as its exit code (0 succeeded, 1 failed,
  2 cancelled). Ctrl-C stops the application cluster (its jobs stop with it).
- **detached** (``-d``): returns once the JobManager serves REST, printing where; its output
  goes to ``log/jobmanager.out``.
- **high availability** (``--jobmanagers N``, or ``high-availability.type`` configured): N
  JobManager processes (``jobmanager.pid``, ``jobmanager-2.pid``, ...; each with its port
  file) share the application's HA directory; one leads and runs main(), the others stand by and
  run it again when they take over, its jobs keeping their ids. Without a configured type,
  several JobManagers use FILE high availability under ``<application dir>/ha``; without a
  configured ``high-availability.cluster-id`` it is ``/application-<application id>``. An
  attached command follows whichever JobManager leads and returns the application's status.

Defaults an application cluster sets unless configured: ``resourcemanager.type: active``,
``rest.port: 0`` and ``jobmanager.rpc.port: 0`` (any free port, so several applications and a
session cluster share a host), ``env.log.dir`` as above, and ``taskmanager.numberOfTaskSlots``
= this host's cores: its TaskManagers run on this host, and one TaskManager with a Spark server
of all cores starts faster and uses less memory than one per slot (measured: two TaskManagers
of one slot took 10.5 s each to start on 2 cores, one of two slots 6.4 s).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from flintlock.client.remote import cluster_state_dir
from flintlock.client.secret_file import write_secret_file
from flintlock.config import Configuration, load_cluster_configuration
from flintlock.config.options import CLUSTER_SECRET, EXECUTION_TARGET, HA_CLUSTER_ID, HA_TYPE
from flintlock.exceptions import FlintlockException
from flintlock.runtime.entrypoint.common import SECRET_ENV

__all__ = ["ApplicationCluster", "ApplicationClusterException", "start_application_cluster",
           "start_dedicated_job_manager", "wait_for_application"]

#: settings an application cluster gets unless the configuration has them
_DEFAULTS = {"resourcemanager.type": "active", "rest.port": "0", "jobmanager.rpc.port": "0",
             "resourcemanager.initial-task-managers": "1"}


class ApplicationClusterException(FlintlockException):
    """The application cluster could not be started; the message says why and where the logs are."""


@dataclass
class ApplicationCluster:
    """A JobManager started for one application (or, ``per-job``, for one job)."""

    application_id: str
    state_dir: Path
    process: subprocess.Popen[bytes]
    #: "" when the application ended before its REST port could be read
    rest_url: str
    secret: str = ""
    #: the other JobManagers of a highly available application (standing by at the start)
    standbys: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [self.process, *self.standbys]

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"


def start_application_cluster(program: str, args: list[str], overrides: Configuration,
                              detached: bool, timeout_s: float = 120.0,
                              job_managers: int = 1) -> ApplicationCluster:
    """Start the JobManager(s) of an application cluster for ``program`` and wait until one
    leads and serves REST.

    Args:
        overrides: the command line's configuration (``-D``, ``-p``); passed on to the JobManager
            and from it to the TaskManagers.
        detached: the JobManager's output goes to ``log/jobmanager.out`` instead of this
            process's stdout and stderr, and it runs in its own session.
        job_managers: JobManager processes; more than one stand by for each other (high
            availability; FILE under the application's directory unless a type is configured).

    Raises:
        ApplicationClusterException: the program file does not exist, or the JobManager ended or
            did not serve within ``timeout_s``.
    """
    if not Path(program).is_file():
        raise ApplicationClusterException(
            f"Program file {program!r} does not exist or is not a file.")
    if job_managers < 1:
        raise ApplicationClusterException(f"--jobmanagers must be at least 1, got {job_managers}")
    return start_dedicated_job_manager("application-cluster", [program, *args], overrides,
                                       "applications", show_output=not detached,
                                       timeout_s=timeout_s, job_managers=job_managers)


def start_dedicated_job_manager(command_name: str, tail: list[str], overrides: Configuration,
                                kind_dir: str, show_output: bool, timeout_s: float = 120.0,
                                job_managers: int = 1) -> ApplicationCluster:
    """Start ``flintlock <command_name> -D ... --port-file F <tail>`` (``job_managers`` times,
    standing by for each other) in its own session with its state in
    ``<cluster.state-dir>/<kind_dir>/<id>/`` and wait until one serves REST as the leader.

    Raises:
        ApplicationClusterException: it ended or did not serve within ``timeout_s``.
    """
    conf = load_cluster_configuration().add_all(overrides)
    cluster_id = secrets.token_hex(16)
    state = cluster_state_dir(conf) / kind_dir / cluster_id
    (state / "log").mkdir(parents=True)
    secret = conf.get(CLUSTER_SECRET) or os.environ.get(SECRET_ENV)
    if not secret:
        secret = secrets.token_hex(32)
        write_secret_file(state / "secret", secret)
    defaults = {**_DEFAULTS, "taskmanager.numberOfTaskSlots": str(os.cpu_count() or 1)}
    settings = {key: value for key, value in defaults.items() if conf.get_raw(key) is None}
    settings.update({k: v for k, v in overrides.to_dict().items() if k != EXECUTION_TARGET.key})
    if conf.get_raw("env.log.dir") is None:
        settings["env.log.dir"] = str(state / "log")
    if job_managers > 1 and conf.get(HA_TYPE) == "NONE":
        settings.update({"high-availability.type": "FILE",
                         "high-availability.storageDir": str(state / "ha")})
    if settings.get(HA_TYPE.key, conf.get(HA_TYPE)) != "NONE" and conf.get_raw(HA_CLUSTER_ID.key) is None:
        settings[HA_CLUSTER_ID.key] = f"/application-{cluster_id}"  # its jobs' ids derive from it
    env = {**os.environ, SECRET_ENV: str(secret), "PYTHONUNBUFFERED": "1"}
    processes, port_files = [], []
    for n in range(job_managers):
        name = "jobmanager" if n == 0 else f"jobmanager-{n + 1}"
        port_files.append(state / f"{name}.port")
        command = [sys.executable, "-m", "flintlock", command_name,
                   *[a for k, v in settings.items() for a in ("-D", f"{k}={v}")],
                   "--port-file", str(port_files[-1]), *tail]
        if show_output:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env,
                                       start_new_session=True)
        else:
            with open(state / "log" / f"{name}.out", "ab") as out:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                           stderr=subprocess.STDOUT, env=env,
                                           start_new_session=True)
        (state / f"{name}.pid").write_text(str(process.pid))
        processes.append(process)
    try:
        port = _wait_for_rest_port(processes, port_files, state, timeout_s)
    except ApplicationClusterException:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        raise
    return ApplicationCluster(cluster_id, state, processes[0],
                              f"http://127.0.0.1:{port}" if port is not None else "", str(secret),
                              standbys=processes[1:])


def _wait_for_rest_port(processes: list[subprocess.Popen[bytes]], port_files: list[Path],
                        state: Path, timeout_s: float) -> int | None:
    """The leading JobManager's REST port, once its port file has it (a standby's says
    ``"leader": false``); None when the application ended first (the exit codes tell how)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for port_file in port_files:
            try:
                ports = json.loads(port_file.read_text())
                if ports.get("leader", True) and ports.get("rest_port"):
                    return int(ports["rest_port"])
            except (OSError, ValueError, AttributeError, TypeError):
                pass
        codes = [p.poll() for p in processes]
        if all(code is not None for code in codes):
            if any(code in (0, 1, 2) for code in codes):
                return None  # the application already ended (its REST port file is gone)
            raise ApplicationClusterException(
                f"the application's JobManager exited with code {codes[0]} during start-up; "
                f"see {state / 'log'}")
        time.sleep(0.05)
    raise ApplicationClusterException(
        f"the application's JobManager did not serve within {timeout_s:.0f} s; see "
        f"{state / 'log'}")


def wait_for_application(cluster: ApplicationCluster) -> int:
    """Wait for an attached application to end (every JobManager of it); returns its exit
    code: the status of the JobManager that ended it, 0/1/2 (a JobManager killed meanwhile ends
    with a signal, and its standby takes over; standbys exit with the recorded status). Ctrl-C (SIGINT) stops the application cluster
    (SIGTERM to its JobManagers, which stop their TaskManagers)."""
    try:
        codes = [process.wait() for process in cluster.processes]
    except KeyboardInterrupt:
        for process in cluster.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = []
        for process in cluster.processes:
            try:
                codes.append(process.wait(60))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                codes.append(process.wait())
    # 0/1/2 from the JobManager that ended it (and the standbys that read its record); a
    # standby stopped before it led ends with 0, the leader stopped with it with 2 (cancelled)
    ended = [code for code in codes if code in (0, 1, 2)]
    return max(ended) if ended else codes[0]
