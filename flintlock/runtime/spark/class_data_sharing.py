"""A class-data-sharing archive of the embedded Spark server's classes (JDK dynamic AppCDS).

A fresh Spark JVM spends seconds loading, parsing and verifying the tens of thousands of classes
that Spark Connect, Spark SQL and Parquet need, first while the server starts and again during its
first queries. JDK 13+ can dump the classes a JVM loaded into an archive when it exits
(``-XX:ArchiveClassesAtExit``) and map them into later JVMs (``-XX:SharedArchiveFile``): JEP 350,
"Dynamic CDS Archives". Measured on this 2-core machine (PySpark 4.3.0, OpenJDK 17, a
``local[2]`` Connect server, TPC-H Q6 at SF 1 as its first query): without an archive the server
was up in 6.2-7.9 s and ran the query in 5.6 s; with one in 3.7-3.9 s and 2.8-2.9 s.

What it needs and what it does:

- The archive belongs to one JVM build, one classpath and one garbage collector. Its file name
  carries a key (``archive_key``) over the ``java`` executable, pyspark's version and the jars in
  its ``jars/`` directory (name, size and modification time: the JVM refuses an archive when a jar
  on its classpath has another size or time, so a reinstalled pyspark needs a new archive), and
  the collector flag of the server's options; a JVM handed an archive that does not match it
  anyway ignores it (``-Xshare:auto``, the default) and starts as before.
- ``archive_options`` gives ``-XX:SharedArchiveFile=<path>`` when the archive exists; the
  embedded server (``session.SparkSessionProvider``) adds it to the driver's JVM options.
- ``ensure`` builds a missing archive in a child process (``python -m
  flintlock.runtime.spark.class_data_sharing build``): a ``local[1]`` server started with
  ``-XX:ArchiveClassesAtExit`` runs ``training_workload`` (``warm_up``'s plan plus an Arrow
  collect, ``createDataFrame`` from Arrow, a Python function over Arrow batches, a window
  function and a broadcast join: what flintlock's tasks run), then the process closes the JVM's
  gateway and waits while the JVM writes the archive at exit. The archive is written under a
  temporary name and renamed into place, so a reader never sees half an archive; a build holds
  ``<dir>/<name>.lock`` (``flock``) so concurrent builds do not collide. ``make test`` and
  ``make demo`` run ``ensure``; a process that starts an embedded server without an archive
  starts a build in the background (once per key: ``<name>.attempted``), at nice 19 in a session
  of its own, so that the next server has it. A server's start touches its archive; a build
  deletes the other archives no server used for 30 days (``remove_unused``).

Configuration: ``taskmanager.spark.class-data-sharing`` (on by default) and
``taskmanager.spark.class-data-sharing.dir`` (default ``$XDG_CACHE_HOME/flintlock/jvm``, else
``~/.cache/flintlock/jvm``). Not a Flink concept: Flink's TaskManagers are JVMs whose classes load
once per process, and this does the same for the JVM each TaskManager starts for Spark.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flintlock.runtime.spark.session import DEFAULT_GC, collector_flag

__all__ = ["archive_key", "archive_options", "archive_path", "default_directory", "ensure",
           "remove_unused", "start_background_build", "training_workload"]

log = logging.getLogger(__name__)

#: this module's import name (``__name__`` is ``__main__`` when it runs as ``python -m``)
_MODULE = "flintlock.runtime.spark.class_data_sharing"

#: a temporary dump older than this belongs to a build that was killed (seconds)
_STALE_DUMP_S = 600.0
#: an archive smaller than this is a failed dump (a real one is ~200 MB)
_MIN_ARCHIVE_BYTES = 1 << 20
#: how long a build may take before it is given up (seconds)
BUILD_TIMEOUT_S = 300.0
#: a build deletes the other archives no server used for this long (seconds)
UNUSED_FOR_S = 30 * 86400.0


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/flintlock/jvm``, else ``~/.cache/flintlock/jvm``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "flintlock" / "jvm"


def _java_executable() -> str | None:
    home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(candidate) if candidate and os.path.exists(candidate) else None


def _spark_jars() -> tuple[str, list[tuple[str, int, int]]]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    listing = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime))
                     for p in jars.glob("*.jar")) if jars.is_dir() else []
    return str(pyspark.__version__), listing


def archive_key(java: str, java_identity: tuple[int, float], spark_version: str,
                jars: list[tuple[str, int, int]], collector: str) -> str:
    """The key of an archive: 16 hex digits over the JVM (executable path, size and mtime), the
    Spark build (version; jar names, sizes in bytes and modification times in s, which the JVM
    checks when it maps the archive) and the collector flag. Pure."""
    material = json.dumps([java, list(java_identity), spark_version, jars, collector])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def archive_path(directory: str | os.PathLike[str], java_options: str) -> Path | None:
    """Where the archive for a server started with ``java_options`` lives (whether or not it
    exists); None when no ``java`` executable is found."""
    java = _java_executable()
    if java is None:
        return None
    stat = os.stat(java)
    version, jars = _spark_jars()
    key = archive_key(java, (stat.st_size, stat.st_mtime), version, jars,
                      collector_flag(java_options))
    return Path(directory) / f"spark-{key}.jsa"


def archive_options(directory: str | os.PathLike[str], java_options: str) -> str:
    """``-XX:SharedArchiveFile=<archive>`` when the archive for ``java_options`` exists, else
    ``""``."""
    path = archive_path(directory, java_options)
    if path is None or not path.is_file():
        return ""
    try:  # its modification time says when it was last used (``remove_unused``)
        os.utime(path)
    except OSError:
        pass
    return f"-XX:SharedArchiveFile={path}"


def remove_unused(directory: str | os.PathLike[str], keep: Path,
                  older_than_s: float = UNUSED_FOR_S, now: float | None = None) -> list[Path]:
    """Delete the archives in ``directory`` other than ``keep`` that no server used for
    ``older_than_s`` seconds (those of an upgraded JVM or Spark; ~200 MB each), with their lock,
    marker and log files; returns the archives deleted."""
    now = time.time() if now is None else now
    removed = []
    for archive in Path(directory).glob("spark-*.jsa"):
        try:
            if archive == keep or now - archive.stat().st_mtime < older_than_s:
                continue
            archive.unlink()
        except OSError:
            continue
        removed.append(archive)
        for suffix in (".lock", ".attempted", ".log"):
            archive.with_suffix(suffix).unlink(missing_ok=True)
    return removed


def _build_command(path: Path, java_options: str, *extra: str) -> list[str]:
    """The child process that builds the archive ``path`` (``main``'s ``build``)."""
    return [sys.executable, "-m", _MODULE, "build", "--dir", str(path.parent),
            f"--java-options={java_options}", *extra]


def ensure(directory: str | os.PathLike[str], java_options: str = DEFAULT_GC,
           timeout_s: float = BUILD_TIMEOUT_S) -> Path | None:
    """Build the archive for ``java_options`` unless it exists; return its path, or None when
    it could not be built (the reason is logged; a server then starts without one).

    The build runs in a child process (``build`` below) and takes ~20-40 s."""
    path = archive_path(directory, java_options)
    if path is None:
        log.warning("no java executable found: no class-data-sharing archive")
        return None
    if path.is_file():
        return path
    cmd = _build_command(path, java_options)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(cmd, timeout=timeout_s, capture_output=True, text=True)
    except OSError as exc:
        log.warning("cannot build %s: %s", path, exc)
        return None
    except subprocess.TimeoutExpired:
        log.warning("building %s took more than %.0f s; given up", path, timeout_s)
        return None
    if done.returncode != 0 or not path.is_file():
        log.warning("building %s failed (exit code %s): %s", path, done.returncode,
                    (done.stderr or done.stdout).strip()[-2000:])
        return None
    return path


def start_background_build(directory: str | os.PathLike[str], java_options: str) -> bool:
    """Start building the missing archive for ``java_options`` in a detached child process at
    nice 19, at most once per archive (``<name>.attempted``); returns whether one was started."""
    path = archive_path(directory, java_options)
    if path is None or path.is_file():
        return False
    marker = path.with_suffix(".attempted")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
    except FileExistsError:
        return False
    except OSError as exc:
        log.info("no class-data-sharing archive for the Spark server (%s): %s", path.parent, exc)
        return False
    cmd = _build_command(path, java_options, "--nice", "19")
    with open(path.with_suffix(".log"), "ab") as out:
        subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True)
    log.info("building a class-data-sharing archive for later Spark servers in the background: "
             "%s", path)
    return True


def training_workload(session: Any, scratch_dir: str | None = None) -> None:
    """What the build runs so that the archive holds the classes flintlock's tasks load:
    ``warm_up``'s plan (partitioned Parquet write, scan, filter, aggregations, join, sort, limit,
    collect), then an Arrow collect, ``createDataFrame`` from Arrow, a Python function over Arrow
    batches, a window function and a broadcast join."""
    import pyarrow as pa
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from flintlock.runtime.spark.warm_up import warm_up

    warm_up(session, scratch_dir)
    rows = session.range(0, 5_000).select((F.col("id") % 100).alias("k"),
                                          (F.col("id") / 3).cast("decimal(15,2)").alias("v"))
    rows.toArrow()
    back = session.createDataFrame(pa.table({"k": list(range(100)), "name": ["n"] * 100}))
    ranked = rows.withColumn("r", F.row_number().over(Window.partitionBy("k").orderBy("v")))
    ranked.join(F.broadcast(back), "k").groupBy("name").agg(F.max("r")).collect()

    def unchanged(batches: Any) -> Any:
        yield from batches

    rows.mapInArrow(unchanged, rows.schema).agg(F.count(F.lit(1))).collect()


def _build(directory: Path, java_options: str, nice: int) -> int:
    """The ``build`` command: dump the archive for ``java_options`` into ``directory``."""
    from flintlock.runtime.spark import session as spark_session

    path = archive_path(directory, java_options)
    if path is None:
        print("no java executable found", file=sys.stderr)
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    lock = open(path.with_suffix(".lock"), "w")  # held (and locked) for the whole build
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another process is building {path}", file=sys.stderr)
        return 0
    if path.is_file():
        return 0
    for stale in path.parent.glob(f"{path.name}.*.tmp"):  # left by a build that was killed
        if time.time() - stale.stat().st_mtime > _STALE_DUMP_S:
            stale.unlink(missing_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    started = time.monotonic()
    settings = spark_session.default_spark_settings(1)
    settings["spark.driver.extraJavaOptions"] = (
        f"{java_options} -XX:ArchiveClassesAtExit={temporary} -Xlog:cds=off -Xlog:cds+dynamic=off")
    spark_session._prepare_environment()
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    from pyspark.sql.session import SparkSession as ClassicSession

    port = spark_session._start_local_server("local[1]", settings, nice)
    session = ConnectSession.builder.remote(f"sc://localhost:{port}").create()
    failure = ""
    try:
        training_workload(session)
    except Exception as exc:  # the JVM still has to be stopped and its dump discarded
        failure = f"the training workload failed: {type(exc).__name__}: {exc}"
    session.client.close()
    classic = ClassicSession._instantiatedSession
    gateway = classic.sparkContext._gateway if classic is not None else None
    proc = getattr(gateway, "proc", None)
    if proc is None:
        print("the Spark JVM's process is unknown: cannot wait for its archive", file=sys.stderr)
        return 1
    if failure:  # killed: a JVM that exits writes its dump first (~15 s), only to delete it
        proc.kill()
        proc.wait(timeout=BUILD_TIMEOUT_S)
        temporary.unlink(missing_ok=True)
        print(failure, file=sys.stderr)
        return 1
    assert classic is not None  # else gateway and proc are None
    jvm = classic._jvm
    assert jvm is not None  # set while the session's SparkContext runs
    class_path = str(jvm.java.lang.System.getProperty("java.class.path"))
    classic.sparkContext.stop()
    proc.stdin.close()  # the gateway JVM exits on EOF and writes the archive on its way out
    proc.wait(timeout=BUILD_TIMEOUT_S)
    if proc.returncode != 0 or not temporary.is_file() or (
            temporary.stat().st_size < _MIN_ARCHIVE_BYTES):
        temporary.unlink(missing_ok=True)
        print(f"the JVM wrote no archive (exit code {proc.returncode})", file=sys.stderr)
        return 1
    problem = _unusable(temporary, class_path, java_options)
    if problem:
        temporary.unlink(missing_ok=True)
        print(f"the JVM wrote an archive it cannot use: {problem}", file=sys.stderr)
        return 1
    os.replace(temporary, path)
    print(f"built {path} ({path.stat().st_size >> 20} MiB) in {time.monotonic() - started:.1f} s")
    for stale in remove_unused(directory, path):
        print(f"removed {stale}: unused for {UNUSED_FOR_S / 86400:.0f} days")
    return 0


def _unusable(archive: Path, class_path: str, java_options: str) -> str:
    """Why a JVM on ``class_path`` cannot map ``archive`` (``-Xshare:on`` makes a JVM fail
    instead of ignoring it), or ``""`` when it can. A damaged archive must never be handed to a
    server: a truncated one crashes the JVM that maps it (SIGBUS, measured here)."""
    java = _java_executable()
    if java is None:
        return "no java executable found"
    cmd = [java, "-cp", class_path, f"-XX:SharedArchiveFile={archive}", "-Xshare:on",
           collector_flag(java_options), "-version"]
    try:  # a JVM that crashes on the archive writes hs_err_pid*.log into its working directory
        with tempfile.TemporaryDirectory(prefix="flintlock-cds-check-") as scratch:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=scratch)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if done.returncode == 0 else (done.stderr or done.stdout).strip()[-500:]


def main(argv: list[str] | None = None) -> int:
    """``build`` (dump the archive now unless it exists), ``ensure`` (the same through a child
    process, as ``make test`` runs it) or ``path`` (print where it lives)."""
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description=main.__doc__)
    parser.add_argument("command", choices=("build", "ensure", "path"))
    parser.add_argument("--dir", default=str(default_directory()))
    parser.add_argument("--java-options", default=DEFAULT_GC)
    parser.add_argument("--nice", type=int, default=0)
    args = parser.parse_args(argv)
    directory = Path(args.dir)
    if args.command == "build":
        return _build(directory, args.java_options, args.nice)
    if args.command == "path":
        print(archive_path(directory, args.java_options) or "")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    built = ensure(directory, args.java_options)
    print(f"class-data-sharing archive: {built}" if built else "no class-data-sharing archive")
    return 0 if built else 1


if __name__ == "__main__":
    sys.exit(main())
