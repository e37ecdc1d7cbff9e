"""An Apache Flink distribution (FLINK_HOME) for conformance tests, built from PyPI without installing PyFlink.

``apache-flink`` (a wheel) ships ``pyflink/bin/*`` (the ``flink`` script, ``config.sh``...) and ``pyflink/conf/``;
``apache-flink-libraries`` (a ~310 MB sdist) ships the jars under ``deps/``: ``deps/lib/*.jar`` (flink-dist and
the log4j jars the CLI needs), ``deps/bin/bash-java-utils.jar`` (``config.sh`` reads ``config.yaml`` with it).
Both are fetched with ``pip download --no-deps`` into ``<repo>/.cache/flink/`` and only what ``bin/flink`` needs
is unpacked into ``<repo>/.cache/flink/flink-<version>/``. ``bin/config.sh`` derives FLINK_HOME from the
script's own directory, so ``<home>/bin/flink`` runs as is (we also set FLINK_HOME).

Later calls only check a marker file. The sdist is deleted after unpacking (it is only needed once); a copy at
``/tmp/flinkdl/`` (left there by an earlier manual download) is used instead of downloading when present.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

VERSION = "2.1.1"
REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "flink"
PRESEEDED = (Path("/tmp/flinkdl"),)

# What ``bin/flink`` (CliFrontend) needs from the libraries sdist; the table/cep/scala jars are left out.
_LIB_PREFIXES = ("flink-dist-", "log4j-")


def flink_home(version: str = VERSION) -> Path:
    """``<repo>/.cache/flink/flink-<version>``, a FLINK_HOME whose ``bin/flink`` runs (needs ``java`` on PATH).

    Idempotent: returns at once when already built. Skips the calling test only when PyPI cannot be reached."""
    home = CACHE / f"flink-{version}"
    marker = home / ".complete"
    if marker.exists():
        return home
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent pytest workers build it once
        if not marker.exists():
            _build(home, version)
    return home


def flink_env(home: Path) -> dict[str, str]:
    """Environment for running ``<home>/bin/flink``: FLINK_HOME and FLINK_CONF_DIR point into ``home``."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLINK_") and k != "HADOOP_CLASSPATH"}
    env["FLINK_HOME"] = str(home)
    env["FLINK_CONF_DIR"] = str(home / "conf")
    return env


def _download(spec: str, pattern: str) -> Path:
    for d in (CACHE, *PRESEEDED):
        found = sorted(d.glob(pattern))
        if found:
            return found[0]
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                           "-d", str(CACHE), spec], capture_output=True, text=True, timeout=1200)
    found = sorted(CACHE.glob(pattern))
    if proc.returncode != 0 or not found:
        out = proc.stdout[-2000:] + proc.stderr[-2000:]
        if any(s in out for s in ("NewConnectionError", "Name or service not known", "Temporary failure in name",
                                  "Network is unreachable", "ConnectTimeout", "ProxyError")):
            pytest.skip(f"cannot download {spec} from PyPI (no network): {out[-500:]}")
        raise RuntimeError(f"pip download {spec} failed ({proc.returncode}):\n{out}")
    return found[0]


def _build(home: Path, version: str) -> None:
    wheel = _download(f"apache-flink=={version}", f"apache_flink-{version}-*.whl")
    sdist = _download(f"apache-flink-libraries=={version}", f"apache_flink_libraries-{version}.tar.gz")
    staging = home.with_name(home.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for sub in ("bin", "conf", "lib", "log", "plugins"):  # an empty plugins/ keeps the CLI from warning
        (staging / sub).mkdir(parents=True)
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if len(parts) == 3 and parts[0] == "pyflink" and parts[1] in ("bin", "conf") and parts[2]:
                target = staging / parts[1] / parts[2]
                target.write_bytes(zf.read(info))
                target.chmod(0o755 if parts[1] == "bin" else 0o644)
    root = f"apache_flink_libraries-{version}/deps/"
    with tarfile.open(sdist, "r:gz") as tf:
        for member in tf:  # streamed: one pass over the archive
            if not member.isfile() or not member.name.startswith(root):
                continue
            rel = member.name[len(root):].split("/")
            if len(rel) != 2 or not rel[1].endswith(".jar"):
                continue
            if (rel[0] == "lib" and rel[1].startswith(_LIB_PREFIXES)) or rel[0] == "bin":
                src = tf.extractfile(member)
                assert src is not None
                with src, open(staging / rel[0] / rel[1], "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
    missing = [p for p in ("bin/flink", "bin/config.sh", "bin/bash-java-utils.jar", "conf/config.yaml",
                           f"lib/flink-dist-{version}.jar") if not (staging / p).exists()]
    if missing:
        raise RuntimeError(f"FLINK_HOME built from {wheel.name} + {sdist.name} lacks {missing}")
    (staging / ".complete").write_text(f"apache-flink {version}\n")
    shutil.rmtree(home, ignore_errors=True)
    staging.rename(home)
    if sdist.parent == CACHE:
        sdist.unlink()  # 310 MB only needed for this one extraction
