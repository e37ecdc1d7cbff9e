"""The systems under test and how one workload run is timed on each.

=====================  ===================================================================  =====================
system                 one run                                                              ``wall_s`` / ``job_s``
=====================  ===================================================================  =====================
``flintlock-session``  ``flintlock run --target remote -p P flintlock_job.py`` against a    CLI process / collect
                       session cluster (JobManager + 2 TaskManagers) started once           call; ``rest_s``: the
                                                                                            job's REST duration
``flintlock-local``    ``flintlock run -p P flintlock_job.py`` (embedded MiniCluster, cold) process / collect call
``pyspark-warm``       a request to one long-lived PySpark worker (classic ``local[N]``;    query incl. collect
                       Connect with ``--spark-remote``)
``pyspark-cold``       a fresh ``python pyspark_job.py`` (``local[N]`` or Connect)          process / query
``pyflink``            a fresh ``python pyflink_job.py`` in the PyFlink venv (Table API /   process / query
                       SQL, batch mode, parallelism P, CSV inputs)
``duckdb``             the reference SQL in the harness process (hardware reference)        query incl. fetch
=====================  ===================================================================  =====================

With ``--spark-remote`` (``Context.spark_remote``, see ``benchmarks.spark_target``) the
flintlock TaskManagers get ``-D spark.remote=<url>`` (added to ``flintlock_conf`` by the runner)
and both PySpark systems connect to that Spark Connect server instead of starting ``local[N]``.
A system may decline a workload (``System.skip_reason``; PyFlink for ``flink_sql.UNSUPPORTED``):
the runner records the reason instead of running it.

Every system writes its answer as Arrow IPC (``benchmarks/programs/_answer.py``); the runner
checks it against DuckDB's before the timing counts. Process trees are watched by the
``MemorySampler`` under the system's role names. A process that fails or exceeds the per-run
timeout raises ``RunFailed`` with the tail of its output.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.memory import MemorySampler
from benchmarks.verify import read_answer
from benchmarks.workloads import DataPaths, DuckDB

__all__ = ["PROGRAMS", "SPARK_BASED", "STANDALONE", "SYSTEMS", "Context", "FlintlockSession",
           "RunFailed", "RunResult", "make_system", "run_process", "system_names"]

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "benchmarks" / "programs"
SYSTEMS = ("flintlock-session", "flintlock-local", "pyspark-warm", "pyspark-cold", "pyflink",
           "duckdb")
#: a Spark-based system with this suffix runs on a Spark standalone cluster the harness starts
#: (``flintlock-session@standalone`` against ``pyspark-warm@standalone``), beside the systems
#: without it on their own local Spark, in the same run
STANDALONE = "@standalone"
SPARK_BASED = ("flintlock-session", "flintlock-local", "pyspark-warm", "pyspark-cold")


class RunFailed(RuntimeError):
    """A run did not produce an answer (exit code, timeout or error reply); names the cause."""


@dataclass
class Context:
    """What every system needs to run: inputs, sizes, where to write, how to log."""

    paths: DataPaths
    workdir: Path
    parallelism: int
    cores: int
    task_managers: int
    slots_per_task_manager: int
    timeout_s: float
    sampler: MemorySampler
    log: Any = print
    flintlock_conf: list[str] = field(default_factory=list)  # extra -D key=value
    spark_remote: str | None = None  # Spark Connect URL of the PySpark peers (None: local[N])


@dataclass
class RunResult:
    wall_s: float
    job_s: float | None
    rest_s: float | None
    columns: list[str]
    rows: list[tuple]
    extra: dict[str, Any] = field(default_factory=dict)


def _clean_env(**extra: str) -> dict[str, str]:
    """The harness's environment minus Spark Connect switches (plain PySpark must run classic)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE",
                        "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def run_process(cmd: list[str], role: str | None, ctx: Context, log_name: str,
                env: dict[str, str] | None = None, tree: bool = True) -> float:
    """Run ``cmd`` (cwd: the repository) to completion; return its wall time in seconds.

    Its memory is sampled under ``role`` (with its children unless ``tree`` is false; not at all
    without a role).

    Raises:
        RunFailed: non-zero exit or still running after ``ctx.timeout_s`` (the process group is
            killed); the message carries the output tail (also kept in ``<workdir>/<log_name>``).
    """
    out_path = ctx.workdir / f"{log_name}.log"
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env or _clean_env(),
                                start_new_session=True)
        with ctx.sampler.watching(role, proc.pid, tree) if role else nullcontext():
            try:
                code = proc.wait(timeout=ctx.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise RunFailed(f"{role or cmd[0]}: {' '.join(cmd[-12:])} still running after "
                                f"{ctx.timeout_s:.0f} s (killed); output:\n{_tail(out_path)}") from None
        wall = time.perf_counter() - t0
    if code != 0:
        raise RunFailed(f"{role or cmd[0]}: exit code {code} from {' '.join(cmd)}\n{_tail(out_path)}")
    return wall


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _answer(run_dir: Path) -> tuple[list[str], list[tuple], dict[str, Any]]:
    cols, rows = read_answer(run_dir / "answer.arrow")
    meta = json.loads((run_dir / "meta.json").read_text())
    return cols, rows, meta


def _program_args(ctx: Context, workload: str, run_dir: Path) -> list[str]:
    return ["--workload", workload, *ctx.paths.as_args(),
            "--result", str(run_dir / "answer.arrow"), "--meta", str(run_dir / "meta.json")]


class System:
    name = ""

    def __init__(self, ctx: Context, name: str | None = None) -> None:
        self.ctx = ctx
        #: the class's name, or it with a Spark target suffix (``STANDALONE``)
        self.name = name or type(self).name
        self.info: dict[str, Any] = {}

    def start(self) -> None:
        """Bring the system up (warm systems); may record start-up facts in ``self.info``."""

    def skip_reason(self, workload: str) -> str | None:
        """Why this system does not run ``workload`` (recorded as skipped), or None."""
        return None

    def run(self, workload: str, run_dir: Path) -> RunResult:
        raise NotImplementedError

    def stop(self) -> None:
        """Tear down what ``start`` brought up; must not raise."""


class FlintlockSession(System):
    name = "flintlock-session"

    def __init__(self, ctx: Context, name: str | None = None) -> None:
        super().__init__(ctx, name)
        self.state = ctx.workdir / self.name.replace("flintlock-session", "session-cluster")
        self.d = ["-D", f"cluster.state-dir={self.state}"]
        self._rest: Any = None

    def _cluster_d(self) -> list[str]:
        conf = [f"taskmanager.numberOfTaskSlots={self.ctx.slots_per_task_manager}",
                "rest.port=0", "jobmanager.rpc.port=0", *self.ctx.flintlock_conf]
        return [*self.d, *(a for c in conf for a in ("-D", c))]

    def start(self) -> None:
        import httpx

        cmd = [sys.executable, "-m", "flintlock", "cluster", "start",
               "--taskmanagers", str(self.ctx.task_managers), *self._cluster_d()]
        # not sampled: the daemons are children of `cluster start` until it exits
        started = run_process(cmd, None, self.ctx, f"{self.state.name}-start")
        port = json.loads((self.state / "jobmanager.port").read_text())["rest_port"]
        self._rest = httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", timeout=30)
        for pid_file in sorted(self.state.glob("*.pid")):
            suffix = self.name.removeprefix(type(self).name)  # "" or STANDALONE
            self.ctx.sampler.watch(f"flintlock-{pid_file.stem}{suffix}", int(pid_file.read_text()))
        self.info = {"start_s": started, "rest_port": port,
                     "task_managers": self.ctx.task_managers,
                     "slots_per_task_manager": self.ctx.slots_per_task_manager}
        self.ctx.log(f"  session cluster up in {started:.1f} s (REST :{port})")

    def run(self, workload: str, run_dir: Path) -> RunResult:
        cmd = [sys.executable, "-m", "flintlock", "run", "--target", "remote",
               "-p", str(self.ctx.parallelism), *self.d,
               str(PROGRAMS / "flintlock_job.py"), *_program_args(self.ctx, workload, run_dir)]
        wall = run_process(cmd, "flintlock-client", self.ctx, f"{run_dir.name}-client")
        cols, rows, meta = _answer(run_dir)
        rest_s = None
        if meta.get("job_id"):
            rest_s = self.job_duration_s(meta["job_id"])
        return RunResult(wall, meta["job_s"], rest_s, cols, rows, {"job_id": meta.get("job_id")})

    def get(self, path: str) -> Any:
        """``GET /v1<path>`` of the cluster's REST API, as JSON."""
        return self._rest.get(path).json()

    def job_duration_s(self, job_id: str) -> float | None:
        body = self._rest.get(f"/jobs/{job_id}").json()
        duration = body.get("duration", -1)
        return duration / 1000 if duration is not None and duration >= 0 else None

    def stop(self) -> None:
        if self._rest is not None:
            self._rest.close()
        cmd = [sys.executable, "-m", "flintlock", "cluster", "stop", *self.d]
        try:
            subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=120, env=_clean_env())
        except subprocess.TimeoutExpired:
            self.ctx.log("  warning: `flintlock cluster stop` timed out; see "
                         f"{self.state / 'log'}")


class FlintlockLocal(System):
    name = "flintlock-local"

    def run(self, workload: str, run_dir: Path) -> RunResult:
        conf = [a for c in self.ctx.flintlock_conf for a in ("-D", c)]
        cmd = [sys.executable, "-m", "flintlock", "run", "-p", str(self.ctx.parallelism), *conf,
               str(PROGRAMS / "flintlock_job.py"), *_program_args(self.ctx, workload, run_dir)]
        wall = run_process(cmd, self.name, self.ctx, f"{run_dir.name}-local")
        cols, rows, meta = _answer(run_dir)
        return RunResult(wall, meta["job_s"], None, cols, rows)


def _spark_args(ctx: Context) -> list[str]:
    """``pyspark_job.py``'s Spark: ``--cores N`` (classic ``local[N]``) or ``--remote URL``."""
    if ctx.spark_remote:
        return ["--remote", ctx.spark_remote]
    return ["--cores", str(ctx.cores)]


def _spark_info(ctx: Context) -> dict[str, Any]:
    if ctx.spark_remote:
        return {"spark": f"Spark Connect {ctx.spark_remote}"}
    return {"spark": f"classic local[{ctx.cores}]"}


class PySparkCold(System):
    name = "pyspark-cold"

    def start(self) -> None:
        self.info = _spark_info(self.ctx)

    def run(self, workload: str, run_dir: Path) -> RunResult:
        cmd = [sys.executable, str(PROGRAMS / "pyspark_job.py"), *_spark_args(self.ctx),
               *_program_args(self.ctx, workload, run_dir)]
        env = _clean_env(PYSPARK_PYTHON=sys.executable)
        wall = run_process(cmd, self.name, self.ctx, f"{run_dir.name}-pyspark", env)
        cols, rows, meta = _answer(run_dir)
        return RunResult(wall, meta["job_s"], None, cols, rows)


class PySparkWarm(System):
    name = "pyspark-warm"

    def __init__(self, ctx: Context, name: str | None = None) -> None:
        super().__init__(ctx, name)
        self.proc: subprocess.Popen[str] | None = None
        self._err: Any = None
        self._log = ctx.workdir / f"{self.name}-worker.log"

    def start(self) -> None:
        cmd = [sys.executable, str(PROGRAMS / "pyspark_job.py"), "--serve",
               *_spark_args(self.ctx), *self.ctx.paths.as_args()]
        self._err = open(self._log, "wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True,
                                     env=_clean_env(PYSPARK_PYTHON=sys.executable),
                                     start_new_session=True)
        self.ctx.sampler.watch(f"{self.name}-driver", self.proc.pid)
        self._reply(max(self.ctx.timeout_s, 120))
        self.info = {"start_s": time.perf_counter() - t0, **_spark_info(self.ctx)}
        self.ctx.log(f"  PySpark worker up in {self.info['start_s']:.1f} s")

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            code = self.proc.poll()
            raise RunFailed(f"{self.name} worker: no reply within {timeout_s:.0f} s (exit code "
                            f"{code}); see {self._log}")
        return json.loads(line)

    def run(self, workload: str, run_dir: Path) -> RunResult:
        assert self.proc is not None and self.proc.stdin is not None
        request = {"workload": workload, "result": str(run_dir / "answer.arrow"),
                   "meta": str(run_dir / "meta.json")}
        t0 = time.perf_counter()
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._reply(self.ctx.timeout_s)
        wall = time.perf_counter() - t0
        if not reply.get("ok"):
            raise RunFailed(f"{self.name}: {reply.get('error')}\n{reply.get('traceback', '')}")
        cols, rows, meta = _answer(run_dir)
        return RunResult(meta["job_s"], meta["job_s"], None, cols, rows, {"request_s": wall})

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            _kill_group(self.proc)
        if self._err is not None:
            self._err.close()


class PyFlink(System):
    name = "pyflink"

    def start(self) -> None:
        from benchmarks.pyflink_env import PYFLINK_VERSION, ensure_pyflink

        self.python = ensure_pyflink(log=self.ctx.log)
        self.info = {"apache-flink": PYFLINK_VERSION, "python": str(self.python),
                     "inputs": "CSV copies of the Parquet data (no Parquet format in PyFlink's pip "
                               "package)"}

    def skip_reason(self, workload: str) -> str | None:
        from benchmarks.flink_sql import UNSUPPORTED

        return UNSUPPORTED.get(workload)

    def run(self, workload: str, run_dir: Path) -> RunResult:
        from benchmarks.flink_sql import flink_spec

        spec = flink_spec(workload, self.ctx.paths, self.ctx.parallelism,
                          run_dir / "answer.arrow", run_dir / "meta.json", self.ctx.log)
        spec_path = run_dir / "spec.json"
        spec_path.write_text(json.dumps(spec))
        cmd = [str(self.python), str(PROGRAMS / "pyflink_job.py"), str(spec_path)]
        wall = run_process(cmd, self.name, self.ctx, f"{run_dir.name}-pyflink", _clean_env())
        cols, rows, meta = _answer(run_dir)
        return RunResult(wall, meta["job_s"], None, cols, rows)


class DuckDBSystem(System):
    name = "duckdb"

    def start(self) -> None:
        import duckdb

        self.db = DuckDB(self.ctx.paths)
        self.info = {"duckdb": duckdb.__version__, "threads": self.db.con.execute(
            "SELECT current_setting('threads')").fetchone()[0]}
        self.ctx.sampler.watch("harness+duckdb", os.getpid(), tree=False)

    def run(self, workload: str, run_dir: Path) -> RunResult:
        cols, rows, took = self.db.run(workload)
        return RunResult(took, took, None, cols, rows)

    def stop(self) -> None:
        self.db.close()


_CLASSES: dict[str, type[System]] = {
    c.name: c for c in (FlintlockSession, FlintlockLocal, PySparkWarm, PySparkCold, PyFlink,
                        DuckDBSystem)
}


def system_names() -> tuple[str, ...]:
    """Every system name ``make_system`` accepts: ``SYSTEMS`` and the Spark-based ones on the
    standalone cluster (``STANDALONE``)."""
    return (*SYSTEMS, *(f"{name}{STANDALONE}" for name in SPARK_BASED))


def make_system(name: str, ctx: Context) -> System:
    """The system called ``name`` (one of ``system_names()``) on ``ctx``'s Spark; the caller
    gives a ``STANDALONE`` system a context whose ``spark_remote`` is that cluster.

    Raises:
        ValueError: an unknown name.
    """
    base = name.removesuffix(STANDALONE)
    if name not in system_names():
        raise ValueError(f"unknown system {name!r}; choose from {', '.join(system_names())}")
    return _CLASSES[base](ctx, name)
