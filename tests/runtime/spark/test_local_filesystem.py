"""The embedded Spark server's local file system without chmod forks (``local_filesystem``).

The jar is compiled with the JDK's javac (skipped on a JRE); the shared test server runs with it,
so every Spark test writes through it; here its class is checked in the server and the
permissions it gives files and directories are compared with Hadoop's.
"""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import pytest

from flintlock.runtime.spark import local_filesystem

needs_javac = pytest.mark.skipif(local_filesystem._javac() is None, reason="no javac (a JRE only)")


@needs_javac
def test_the_jar_is_compiled_once_and_holds_both_classes(tmp_path: Path) -> None:
    jar = local_filesystem.ensure_jar(tmp_path)
    assert jar is not None and jar == local_filesystem.jar_path(tmp_path)
    with zipfile.ZipFile(jar) as archive:
        assert sorted(archive.namelist()) == ["flintlock/hadoop/NioLocalFileSystem.class",
                                              "flintlock/hadoop/NioRawLocalFileSystem.class"]
    built = jar.stat().st_mtime_ns
    assert local_filesystem.ensure_jar(tmp_path) == jar
    assert jar.stat().st_mtime_ns == built  # not compiled again
    assert [p.name for p in tmp_path.iterdir()] == [jar.name]  # nothing left of the build


def test_without_javac_there_is_no_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_filesystem, "_javac", lambda: None)
    assert local_filesystem.jar_path(tmp_path) is None
    assert local_filesystem.ensure_jar(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_the_jar_goes_last_on_the_server_class_path_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/opt/hadoop/lib/a.jar")
    jar = Path("/cache/flintlock-localfs-0.jar")
    local_filesystem.add_to_server_class_path(jar)
    local_filesystem.add_to_server_class_path(jar)
    import os

    assert os.environ["SPARK_DIST_CLASSPATH"] == f"/opt/hadoop/lib/a.jar{os.pathsep}{jar}"


@needs_javac
@pytest.mark.spark
def test_the_embedded_server_writes_with_it_and_the_same_permissions(spark, tmp_path: Path) -> None:
    from flintlock.runtime.spark import session as spark_session

    classic = spark_session._local_server.get("classic")
    if classic is None:
        pytest.skip("the test session runs on a remote Spark server")
    jvm = classic._jvm
    conf = classic.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert fs.getClass().getName() == local_filesystem.FILE_SYSTEM_CLASS
    assert fs.getRawFileSystem().getClass().getName() == "flintlock.hadoop.NioRawLocalFileSystem"

    out = tmp_path / "out"
    (spark.range(0, 100).selectExpr("id % 3 AS sp", "id")
     .write.partitionBy("sp").parquet(str(out)))
    umask = 0o022  # Hadoop's default fs.permissions.umask-mode
    dirs = [p for p in out.rglob("*") if p.is_dir()]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(dirs) == 3 and len(files) >= 3
    assert {stat.S_IMODE(p.stat().st_mode) for p in dirs} == {0o777 & ~umask}
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o666 & ~umask}
    assert spark.read.parquet(str(out)).count() == 100
