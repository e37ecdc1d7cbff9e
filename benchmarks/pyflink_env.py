"""The PyFlink virtual environment, created on demand (``.cache/bench-pyflink-venv``).

apache-flink 2.3.0 pins ``pandas<2.3`` and ``pyarrow<21``, which conflict with flintlock's own
dependencies (pandas 2.3, pyarrow >= 21 through PySpark 4.3.0), so PyFlink never lives in the
project's venv: the harness creates a separate venv with ``python -m venv`` and ``pip install
apache-flink==<version>``, and runs every PyFlink workload as a subprocess of that venv's
interpreter. PyFlink needs Java 11 or 17 on ``PATH`` (or ``JAVA_HOME``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["PYFLINK_VERSION", "PyFlinkUnavailable", "ensure_pyflink", "pyflink_python"]

PYFLINK_VERSION = "2.3.0"
REPO = Path(__file__).resolve().parents[1]
DEFAULT_VENV = REPO / ".cache" / "bench-pyflink-venv"
_MARKER = ".flintlock-bench.json"


class PyFlinkUnavailable(RuntimeError):
    """PyFlink could not be installed or started; the message says why and what to do."""


def pyflink_python(venv: Path = DEFAULT_VENV) -> Path:
    return venv / "bin" / "python"


def _installed(venv: Path, version: str) -> bool:
    try:
        meta = json.loads((venv / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    return meta.get("apache-flink") == version and pyflink_python(venv).exists()


def ensure_pyflink(venv: Path = DEFAULT_VENV, version: str = PYFLINK_VERSION,
                   log=print) -> Path:  # type: ignore[no-untyped-def]
    """Return the interpreter of a venv holding ``apache-flink==version``, creating it if needed.

    Creation takes a few minutes once (apache-beam and the Flink jars, ~400 MB); later calls return
    at once (a marker file records the installed version).

    Raises:
        PyFlinkUnavailable: no Java on PATH, or ``venv``/``pip install`` failed (pip's output tail
            is in the message).
    """
    if _installed(venv, version):
        return pyflink_python(venv)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise PyFlinkUnavailable("PyFlink needs Java 11 or 17: install a JDK or set JAVA_HOME")
    log(f"creating the PyFlink venv {venv} (apache-flink=={version}; a few minutes, once)")
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(pyflink_python(venv)), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(pyflink_python(venv)), "-m", "pip", "install", "--quiet",
         f"apache-flink=={version}", "psutil"],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr)[-2000:]
            raise PyFlinkUnavailable(
                f"{' '.join(cmd[:4])} ... failed with exit code {proc.returncode}; skip PyFlink "
                f"with --systems (without pyflink) or fix the install:\n{tail}"
            )
    (venv / _MARKER).write_text(json.dumps({"apache-flink": version}) + "\n")
    return pyflink_python(venv)


if __name__ == "__main__":
    print(ensure_pyflink())
