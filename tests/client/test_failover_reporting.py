"""``flintlock run`` (attached, no terminal) prints each failure and restart as it happens, and the
restarted job's output holds every record exactly once (local cluster, real Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from flintlock.client.cli import cli

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]

#: argv: <marker file> <output dir>; the map fails once, at id 7, until the marker exists
FLAKY = """
import os, sys
from flintlock import StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.connectors import FileSink

marker, out = sys.argv[1], sys.argv[2]

def flaky(row):
    if row.id == 7 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("injected failure")
    return (row.id * 2,)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(2, 2000))
env.from_sequence(1, 20).map(flaky, "x long").sink_to(FileSink.parquet(out))
env.execute("flaky")
"""


def test_run_prints_the_failure_the_restart_and_running_again(tmp_path: Path, spark) -> None:
    prog = tmp_path / "flaky.py"
    prog.write_text(FLAKY)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(prog), str(tmp_path / "marker"), str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()

    def index(fragment: str) -> int:
        found = [i for i, line in enumerate(lines) if fragment in line]
        assert len(found) == 1, f"{fragment!r} in {len(found)} lines:\n{result.stderr}"
        return found[0]

    failed = index("attempt 0 failed on ")
    assert lines[failed].startswith("Subtask 'Source: Sequence Source [1, 20] -> Map")
    assert lines[failed].endswith("RuntimeError: injected failure (in the Spark Python worker)")
    restarting = index("Job RESTARTING: restarting 1 subtask (restart #1, next attempt in ")
    running = index("Job RUNNING")
    finished = index("(flaky) FINISHED in")
    assert failed < restarting < running < finished
    rows = sorted(x for f in out.glob("*.parquet") for x in pq.read_table(f).column("x").to_pylist())
    assert rows == [2 * i for i in range(1, 21)]  # each record once, none lost
