"""A local file system for embedded Spark servers that does not fork ``chmod`` for every file.

Spark reads and writes ``file:`` paths through Hadoop's ``LocalFileSystem``, whose
``RawLocalFileSystem`` sets a permission on every file and directory it creates. Without
Hadoop's native library (pyspark ships none) it does so by forking ``chmod``: a process of the
Spark JVM per file and directory. Counted here with JFR: nine ``chmod`` processes for one
unpartitioned Parquet write of one file; a write partitioned into subpartitions (every result
partition of a flintlock task) makes a directory, a data file and a checksum file per
subpartition and task attempt, each with its own ``chmod``.

``NioLocalFileSystem`` (``java/flintlock/hadoop/``, two small classes) is Hadoop's
``LocalFileSystem`` over a ``RawLocalFileSystem`` whose ``setPermission`` uses
``java.nio.file.Files.setPosixFilePermissions``: the same permission bits, no process. Measured
on a warm embedded server (``local[2]``, 5,000 rows, median of 8): a Parquet write 209-227 ms ->
164-167 ms, a write partitioned into 8 subpartitions 364-398 ms -> 208-252 ms.

How it reaches the server: the classes are compiled once per JDK and Spark build into
``<cache>/flintlock/jvm/flintlock-localfs-<key>.jar`` (``javac`` of the JDK that runs Spark, ~2
s; ``ensure_jar``), the jar is appended to the server's class path through
``SPARK_DIST_CLASSPATH`` and ``spark.hadoop.fs.file.impl`` names the class. Appending keeps the
class-data-sharing archive usable: the JVM maps an archive when its class path at dump time is
a prefix of the current one, and Spark puts ``spark.driver.extraClassPath`` first (tried: the
archive was ignored, the server took 6.1 s to start instead of 3.2 s). Without a ``javac`` (a
JRE only) the server keeps Hadoop's file system. ``taskmanager.spark.fast-local-filesystem:
false`` turns it off; a configured ``spark.hadoop.fs.file.impl`` wins. Remote Spark servers
(``spark.remote``) keep their own.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

__all__ = ["FILE_SYSTEM_CLASS", "add_to_server_class_path", "ensure_jar", "jar_path"]

log = logging.getLogger(__name__)

#: the ``fs.file.impl`` class
FILE_SYSTEM_CLASS = "flintlock.hadoop.NioLocalFileSystem"

_SOURCES = Path(__file__).parent / "java"
_COMPILE_TIMEOUT_S = 120.0


def _javac() -> str | None:
    """The ``javac`` of the JDK whose ``java`` runs Spark (``JAVA_HOME``, else the ``java`` on the
    path), or None for a JRE."""
    from flintlock.runtime.spark.class_data_sharing import _java_executable

    java = _java_executable()
    if java is None:
        return None
    candidate = Path(java).parent / "javac"
    return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None


def _sources() -> list[Path]:
    return sorted(_SOURCES.rglob("*.java"))


def jar_path(directory: str | os.PathLike[str]) -> Path | None:
    """Where the jar for this JDK, Spark build and source lives (whether or not it exists): its
    name carries 16 hex digits over ``javac``'s path, size and modification time, pyspark's
    version and the sources; None without a ``javac``."""
    javac = _javac()
    if javac is None:
        return None
    import pyspark

    stat = os.stat(javac)
    digest = hashlib.sha256(f"{javac}|{stat.st_size}|{stat.st_mtime}|{pyspark.__version__}"
                            .encode())
    for source in _sources():
        digest.update(source.read_bytes())
    return Path(directory) / f"flintlock-localfs-{digest.hexdigest()[:16]}.jar"


def ensure_jar(directory: str | os.PathLike[str]) -> Path | None:
    """The jar of ``NioLocalFileSystem``, compiled into ``directory`` unless it is there; None
    (logged once, at INFO) without a ``javac`` or when compiling fails: the server then keeps
    Hadoop's file system.

    A jar appears only complete (written under a temporary name, then renamed), so processes
    starting servers at the same time at worst compile it twice."""
    path = jar_path(directory)
    if path is None:
        log.info("no javac next to the java that runs Spark: Spark keeps Hadoop's local file "
                 "system (which forks chmod for every file it writes)")
        return None
    if path.is_file():
        return path
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="flintlock-localfs-", dir=path.parent) as build:
            classes = Path(build) / "classes"
            done = subprocess.run(
                [str(_javac()), "-nowarn", "--release", "11", "-cp", str(jars / "*"),
                 "-d", str(classes), *map(str, _sources())],
                capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S)
            if done.returncode != 0:
                log.warning("compiling the local file system for Spark failed; Spark keeps "
                            "Hadoop's: %s", (done.stderr or done.stdout).strip()[-2000:])
                return None
            temporary = Path(build) / path.name
            with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as jar:
                for item in sorted(classes.rglob("*.class")):
                    jar.write(item, item.relative_to(classes).as_posix())
            os.replace(temporary, path)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("cannot build %s; Spark keeps Hadoop's local file system: %s", path, exc)
        return None
    return path


def add_to_server_class_path(jar: Path) -> None:
    """Append ``jar`` to the class path of Spark JVMs this process launches afterwards
    (``SPARK_DIST_CLASSPATH``, which Spark's launcher puts last), once."""
    current = os.environ.get("SPARK_DIST_CLASSPATH", "")
    entries = [e for e in current.split(os.pathsep) if e]
    if str(jar) not in entries:
        os.environ["SPARK_DIST_CLASSPATH"] = os.pathsep.join([*entries, str(jar)])

