"""Streaming word count: text files dropped into a directory are counted while the job runs.

``FileSource.text(dir).monitor_continuously(interval)`` picks up every new file once (write it
under a hidden name, then rename it into place, so it is complete when seen); words are counted
per 5-second processing-time window and printed as the windows close:
``word count for [window_start, window_end)``. The sum of a word's counts over all windows is its
count in all files that were dropped (``examples.word_count.REFERENCE_SQL`` without the top-20
limit is the batch answer).

    python -m examples.streaming.word_count --input incoming/ [--window 5s] [--bounded]

``--bounded`` reads the directory's current files once and ends (``make demo``).
"""

from __future__ import annotations

import argparse
import datetime
from typing import Any

from pyspark.sql import functions as F

from examples.word_count import WORD_SPLIT


def build(env: Any, input_dir: str, *, window: datetime.timedelta = datetime.timedelta(seconds=5),
          watch_interval: datetime.timedelta | None = datetime.timedelta(seconds=1)) -> Any:
    """Word counts per processing-time window (``word, window_start, window_end, count``)."""
    from flintlock.api.windows import TumblingProcessingTimeWindows
    from flintlock.connectors import FileSource

    source = FileSource.text(input_dir)
    if watch_interval is not None:
        source = source.monitor_continuously(watch_interval)
    words = (env.from_source(source, "text files")
             .select(F.explode(F.split(F.lower(F.col("value")), WORD_SPLIT)).alias("word"))
             .filter(F.col("word") != ""))
    return (words.key_by("word").window(TumblingProcessingTimeWindows.of(window))
            .agg(F.count(F.lit(1)).alias("count")).name("word counts"))


def main(argv: list[str] | None = None) -> int:
    from flintlock import RuntimeExecutionMode, StreamExecutionEnvironment

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="the directory to watch")
    parser.add_argument("--window", type=float, default=5.0, help="window size in seconds")
    parser.add_argument("--bounded", action="store_true", help="read the current files and end")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    counts = build(env, args.input, window=datetime.timedelta(seconds=args.window),
                   watch_interval=None if args.bounded else datetime.timedelta(seconds=1))
    counts.print()
    result = env.execute("streaming word count")
    if result.net_runtime_ms >= 0:  # --bounded, attached
        print(f"done in {result.net_runtime_ms / 1000:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
