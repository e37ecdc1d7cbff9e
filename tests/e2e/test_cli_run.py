"""``flintlock run`` and ``python program.py`` as separate processes, as users run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(240)]

FLINTLOCK = str(Path(sys.executable).with_name("flintlock"))

PROGRAM = """
import sys
from pyspark.sql import functions as F
from flintlock import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
column = sys.argv[1]
rows = (env.from_sequence(1, 100)
        .with_column("bucket", F.col(column) % 3)
        .key_by("bucket").count()
        .sort("bucket")
        .execute_and_collect())
print("RESULT", [tuple(r) for r in rows])
"""


def _java_children(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,ppid,comm"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()[1:] if line.split()[1] == str(pid) and "java" in line]


def test_python_program_prints_results_and_exits_cleanly(tmp_path: Path) -> None:
    prog = tmp_path / "buckets.py"
    prog.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, str(prog), "id"], capture_output=True, text=True,
                          timeout=200, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULT [(0, 33), (1, 34), (2, 33)]" in proc.stdout
    assert "FINISHED" in proc.stderr


def test_flintlock_run_with_a_missing_column_exits_1_naming_it(tmp_path: Path) -> None:
    prog = tmp_path / "buckets.py"
    prog.write_text(PROGRAM)
    proc = subprocess.Popen([FLINTLOCK, "run", "-p", "2", str(prog), "no_such_col"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=200)
    assert proc.returncode == 1, err[-3000:]
    assert "no_such_col" in err
    assert "FAILED" in err
    assert "RESULT" not in out
    assert _java_children(proc.pid) == []  # the embedded Spark server ended with the client
