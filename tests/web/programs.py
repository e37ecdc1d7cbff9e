"""Programs the browser tests and the screenshot script run on the cluster (argv documented each)."""

from __future__ import annotations

#: argv: <output dir> <rows> <job name> [<row that fails>]. Two vertices: a slow Python map
#: (one sleep per row) chained to its source, then a HASH exchange into a keyed count written by
#: a FileSink. With a failing row the map raises ``ValueError("web-ui-boom at row N")`` there.
SLOW_KEYED_PROGRAM = """
import sys, time
from flintlock import StreamExecutionEnvironment
from flintlock.connectors import FileSink

FAIL_AT = int(sys.argv[4]) if len(sys.argv) > 4 else -1

def slow(row):
    time.sleep(0.02)
    if row.id == FAIL_AT:
        raise ValueError(f"web-ui-boom at row {row.id}")
    return (row.id, row.id % 7)

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
(env.from_sequence(1, int(sys.argv[2]))
    .map(slow, "id long, bucket long").name("Slow map")
    .key_by("bucket").count()
    .sink_to(FileSink.parquet(sys.argv[1])))
env.execute(sys.argv[3])
"""
