"""``socket_text_stream``: lines from a TCP server while it sends, the end of the source when it
closes (max_retry 0), and a clear failure when nothing listens."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import functions as F

from flintlock import Configuration, RuntimeExecutionMode, StreamExecutionEnvironment
from flintlock.api import RestartStrategies
from flintlock.api.windows import TumblingProcessingTimeWindows
from flintlock.client.job_client import JobExecutionException

pytestmark = [pytest.mark.spark]

TEXT = ["to be or not to be", "that is the question", "to sleep perchance to dream\r"]


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration({"local.number-taskmanager": 1, "taskmanager.numberOfTaskSlots": 2}))
    env.set_parallelism(2).set_runtime_mode(RuntimeExecutionMode.STREAMING)
    return env.set_restart_strategy(RestartStrategies.no_restart())


class _Server:
    """Accepts one client, sends TEXT a line at a time (the last without a newline), closes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            for i, line in enumerate(TEXT):
                conn.sendall((line + ("\n" if i < len(TEXT) - 1 else "")).encode())
                time.sleep(0.3)  # several epochs
        self.sock.close()


def test_lines_from_a_socket_are_counted_until_the_server_closes() -> None:
    server = _Server()
    env = _env()
    words = env.socket_text_stream("127.0.0.1", server.port).select(
        F.explode(F.split("value", " ")).alias("word"))
    counts = (words.key_by("word").window(TumblingProcessingTimeWindows.of(60_000))
              .agg(F.count(F.lit(1)).alias("n")))
    got: Counter[str] = Counter()
    for row in counts.execute_and_collect():
        got[row.word] += row.n
    assert got == Counter(" ".join(TEXT).replace("\r", "").split(" "))


def test_a_socket_nobody_listens_on_fails_the_job_naming_host_and_port() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    env = _env()
    env.socket_text_stream("127.0.0.1", port).print()
    with pytest.raises(JobExecutionException) as info:
        env.execute("refused")
    text: Any = str(info.value) + str(info.value.__cause__)
    assert f"cannot connect to 127.0.0.1:{port}" in text, text
