"""The embedded Spark server's class-data-sharing archive (``class_data_sharing``).

Unit tests (no JVM) for the archive's key, its options and the once-only background build; one
slow test builds a real archive into a temporary directory and shows that a new embedded server
maps it (the default directory's, which `make test` builds first, when it is there), and that a
damaged copy is refused before any server could be handed it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flintlock.runtime.spark import class_data_sharing as cds
from flintlock.runtime.spark.session import DEFAULT_GC

_JARS = [("spark-core_2.13-4.3.0.jar", 100, 1700000000),
         ("spark-sql_2.13-4.3.0.jar", 200, 1700000000)]


def _key(**changes: object) -> str:
    args: dict[str, object] = {"java": "/usr/lib/jvm/java-17/bin/java",
                               "java_identity": (1000, 1.5), "spark_version": "4.3.0",
                               "jars": _JARS, "collector": DEFAULT_GC}
    args.update(changes)
    return cds.archive_key(**args)  # type: ignore[arg-type]


def test_the_key_is_stable_and_changes_with_the_jvm_the_jars_and_the_collector() -> None:
    assert _key() == _key()
    assert len(_key()) == 16
    others = {
        _key(java="/opt/jdk-21/bin/java"),
        _key(java_identity=(1000, 2.5)),                  # the JVM was upgraded in place
        _key(spark_version="4.3.1"),
        _key(jars=[*_JARS, ("extra.jar", 5, 1700000000)]),
        _key(jars=[(_JARS[0][0], 101, _JARS[0][2]), _JARS[1]]),  # a jar was replaced
        _key(jars=[(_JARS[0][0], _JARS[0][1], 1700000001), _JARS[1]]),  # ... by a reinstall
        _key(collector="-XX:+UseG1GC"),
    }
    assert _key() not in others and len(others) == 7


@pytest.mark.parametrize(("options", "collector"), [
    ("", DEFAULT_GC),
    ("-Xss4m", DEFAULT_GC),
    ("-XX:+UseG1GC -Xss4m", "-XX:+UseG1GC"),
    (f"{DEFAULT_GC} -Dlog4j2.configurationFile=file:/x", DEFAULT_GC),
])
def test_the_archive_follows_the_servers_collector(tmp_path: Path, options: str,
                                                    collector: str) -> None:
    assert cds.archive_path(tmp_path, options) == cds.archive_path(tmp_path, collector)


def test_options_name_the_archive_only_once_it_exists(tmp_path: Path) -> None:
    path = cds.archive_path(tmp_path, DEFAULT_GC)
    assert path is not None and path.parent == tmp_path and path.name.startswith("spark-")
    assert cds.archive_options(tmp_path, DEFAULT_GC) == ""
    path.write_bytes(b"archive")
    assert cds.archive_options(tmp_path, DEFAULT_GC) == f"-XX:SharedArchiveFile={path}"
    assert cds.archive_options(tmp_path, "-XX:+UseSerialGC") == ""  # another collector's


def test_a_missing_archive_is_built_in_the_background_once(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[str]] = []

    class FakePopen:
        def __init__(self, cmd: list[str], **kwargs: object) -> None:
            assert kwargs["start_new_session"] is True
            started.append(cmd)

    monkeypatch.setattr(cds.subprocess, "Popen", FakePopen)
    assert cds.start_background_build(tmp_path, DEFAULT_GC) is True
    assert cds.start_background_build(tmp_path, DEFAULT_GC) is False  # attempted already
    assert len(started) == 1
    cmd = started[0]
    assert cmd[:3] == [sys.executable, "-m", "flintlock.runtime.spark.class_data_sharing"]
    assert cmd[cmd.index("--dir") + 1] == str(tmp_path) and cmd[cmd.index("--nice") + 1] == "19"
    path = cds.archive_path(tmp_path, DEFAULT_GC)
    assert path is not None
    path.write_bytes(b"archive")
    path.with_suffix(".attempted").unlink()
    assert cds.start_background_build(tmp_path, DEFAULT_GC) is False  # it exists
    assert len(started) == 1


def test_an_unwritable_directory_means_no_archive_and_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert cds.start_background_build(blocker / "jvm", DEFAULT_GC) is False
    assert cds.ensure(blocker / "jvm") is None
    assert cds.archive_options(blocker / "jvm", DEFAULT_GC) == ""


def _child_env() -> dict[str, str]:
    """The environment of a child interpreter that imports this checkout's flintlock."""
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}


_MAPS_ARCHIVE = textwrap.dedent("""
    import sys
    from flintlock.config import Configuration
    from flintlock.runtime.spark.session import SparkSessionProvider, embedded_spark_context
    conf = Configuration()
    conf.set_string("taskmanager.spark.class-data-sharing.dir", sys.argv[1])
    conf.set_string("taskmanager.cpu.cores", "1")
    session = SparkSessionProvider(conf).get()
    assert session.range(3).count() == 3
    jvm = embedded_spark_context()._jvm
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    print("CLASSPATH", jvm.java.lang.System.getProperty("java.class.path"))
    with open(f"/proc/{pid}/maps") as maps:
        print("MAPPED", any(sys.argv[2] in line for line in maps))
""")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.process
@pytest.mark.timeout(300)
def test_a_built_archive_is_mapped_by_the_next_server_and_a_damaged_one_is_refused(
        tmp_path: Path) -> None:
    # `make test` builds the default directory's archive before the tests (`ensure`, whose
    # failure does not stop it); that one is checked when it is there, else one is built here
    ensured = cds.archive_path(cds.default_directory(), DEFAULT_GC)
    directory = cds.default_directory() if ensured is not None and ensured.is_file() else tmp_path
    built = cds.ensure(directory)
    assert built is not None and built.is_file(), "the archive was not built (see the log)"
    assert built == cds.archive_path(directory, DEFAULT_GC)
    assert built.stat().st_size > 50 << 20
    assert not list(directory.glob(f"{built.name}.*.tmp")), "a temporary dump was left behind"

    env = _child_env()
    done = subprocess.run([sys.executable, "-c", _MAPS_ARCHIVE, str(directory), str(built)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines.get("MAPPED") == "True", done.stdout

    class_path = lines["CLASSPATH"]
    assert cds._unusable(built, class_path, DEFAULT_GC) == ""
    damaged = tmp_path / "damaged.jsa"
    damaged.write_bytes(built.read_bytes()[: 1 << 20])  # as a dump cut short would leave it
    crash_logs = set(Path.cwd().glob("hs_err_pid*.log"))
    assert cds._unusable(damaged, class_path, DEFAULT_GC) != ""
    assert set(Path.cwd().glob("hs_err_pid*.log")) == crash_logs, "the check left a crash log"


def _provider(**conf: str):  # type: ignore[no-untyped-def]
    from flintlock.config import Configuration
    from flintlock.runtime.spark.session import SparkSessionProvider

    configuration = Configuration()
    for key, value in conf.items():
        configuration.set_string(key, value)
    return SparkSessionProvider(configuration)


_DIR_KEY = "taskmanager.spark.class-data-sharing.dir"


def test_the_provider_adds_an_existing_archive_to_the_servers_options(tmp_path: Path) -> None:
    provider = _provider(**{_DIR_KEY: str(tmp_path)})
    settings = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert provider._with_class_data_sharing(settings) == str(tmp_path)  # missing: build one
    assert settings == {"spark.driver.extraJavaOptions": "-Xss4m"}
    path = cds.archive_path(tmp_path, DEFAULT_GC)
    assert path is not None
    path.write_bytes(b"archive")
    assert provider._with_class_data_sharing(settings) is None
    assert settings["spark.driver.extraJavaOptions"] == f"-Xss4m -XX:SharedArchiveFile={path}"


@pytest.mark.parametrize("user", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa",
                                  "-XX:ArchiveClassesAtExit=/mine.jsa"])
def test_a_users_own_sharing_flags_or_the_switch_leave_the_options_alone(tmp_path: Path,
                                                                         user: str) -> None:
    path = cds.archive_path(tmp_path, DEFAULT_GC)
    assert path is not None
    path.write_bytes(b"archive")
    settings = {"spark.driver.extraJavaOptions": user}
    assert _provider(**{_DIR_KEY: str(tmp_path)})._with_class_data_sharing(settings) is None
    off = {"spark.driver.extraJavaOptions": ""}
    provider = _provider(**{_DIR_KEY: str(tmp_path),
                            "taskmanager.spark.class-data-sharing": "false"})
    assert provider._with_class_data_sharing(off) is None
    assert settings == {"spark.driver.extraJavaOptions": user}
    assert off == {"spark.driver.extraJavaOptions": ""}


def test_using_an_archive_touches_it_and_a_build_removes_archives_unused_for_30_days(
        tmp_path: Path) -> None:
    current = cds.archive_path(tmp_path, DEFAULT_GC)
    assert current is not None
    current.write_bytes(b"archive")
    os.utime(current, (0, 0))
    assert cds.archive_options(tmp_path, DEFAULT_GC)
    assert current.stat().st_mtime > 1e9  # used now
    day = 86400.0
    now = current.stat().st_mtime
    old, recent = tmp_path / "spark-0000000000000001.jsa", tmp_path / "spark-0000000000000002.jsa"
    for archive, age in ((old, 31 * day), (recent, 29 * day)):
        archive.write_bytes(b"other")
        archive.with_suffix(".lock").write_text("")
        os.utime(archive, (now - age, now - age))
    os.utime(current, (now - 60 * day, now - 60 * day))  # kept: it is the one just built
    other = tmp_path / "notes.txt"
    other.write_text("not an archive")
    assert cds.remove_unused(tmp_path, keep=current, now=now) == [old]
    assert not old.exists() and not old.with_suffix(".lock").exists()
    assert recent.exists() and recent.with_suffix(".lock").exists()
    assert current.exists() and other.exists()


_FAILING_BUILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from flintlock.runtime.spark import class_data_sharing as cds

    def broken(session, scratch_dir=None):
        raise RuntimeError("training broke")

    cds.training_workload = broken
    sys.exit(cds._build(Path(sys.argv[1]), cds.DEFAULT_GC, 0))
""")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.process
@pytest.mark.timeout(300)
def test_a_build_whose_training_fails_stops_its_jvm_and_leaves_no_dump(tmp_path: Path) -> None:
    env = _child_env()
    done = subprocess.run([sys.executable, "-c", _FAILING_BUILD, str(tmp_path)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "the training workload failed: RuntimeError: training broke" in done.stderr
    assert not list(tmp_path.glob("*.jsa")) and not list(tmp_path.glob("*.tmp")), \
        sorted(p.name for p in tmp_path.iterdir())
