"""The embedded Spark server JVM's threads in a TaskManager's thread dump (Flink's form)."""

from __future__ import annotations

from typing import Any

import pytest

from flintlock.runtime.spark.jvm_thread_dump import embedded_jvm_thread_dump, stringify_jvm_thread

#: what Spark's ``StackTrace.toString`` gives for a waiting thread (one frame per line, lock
#: notes on tab-indented lines under their frame)
STACK = ("java.base@17.0.15/java.lang.Object.wait(Native Method)\n"
         "\t-  waiting on java.lang.ref.ReferenceQueue$Lock@3eeecceb\n"
         "java.base@17.0.15/java.lang.ref.ReferenceQueue.remove(ReferenceQueue.java:155)\n"
         "java.base@17.0.15/jdk.internal.ref.CleanerImpl.run(CleanerImpl.java:140)\n"
         "\t-  locked java.lang.Object@1\n"
         "java.base@17.0.15/java.lang.Thread.run(Thread.java:840)")


def test_a_jvm_thread_is_printed_as_flink_prints_one() -> None:
    assert stringify_jvm_thread("Cleaner-0", 61, "TIMED_WAITING", STACK, 50) == (
        '"Cleaner-0" Id=61 TIMED_WAITING (Spark JVM)\n'
        "\tat java.base@17.0.15/java.lang.Object.wait(Native Method)\n"
        "\t-  waiting on java.lang.ref.ReferenceQueue$Lock@3eeecceb\n"
        "\tat java.base@17.0.15/java.lang.ref.ReferenceQueue.remove(ReferenceQueue.java:155)\n"
        "\tat java.base@17.0.15/jdk.internal.ref.CleanerImpl.run(CleanerImpl.java:140)\n"
        "\t-  locked java.lang.Object@1\n"
        "\tat java.base@17.0.15/java.lang.Thread.run(Thread.java:840)\n\n")


def test_a_deep_jvm_stack_is_cut_at_max_depth_with_the_notes_of_shown_frames_only() -> None:
    text = stringify_jvm_thread("Cleaner-0", 61, "TIMED_WAITING", STACK, 2)
    assert text.count("\tat ") == 2
    assert "waiting on" in text and "locked" not in text  # the 3rd frame's note is cut too
    assert text.endswith("\t...\n\n")
    assert stringify_jvm_thread("idle", 1, "RUNNABLE", "", 5) == '"idle" Id=1 RUNNABLE (Spark JVM)\n\n'


@pytest.mark.spark
def test_the_embedded_servers_threads_are_dumped(spark: Any) -> None:
    from flintlock.runtime.spark.session import embedded_spark_context

    if embedded_spark_context() is None:
        pytest.skip("the tests' Spark server is remote (FLINTLOCK_TEST_SPARK_REMOTE)")
    dump = embedded_jvm_thread_dump(3)
    names = [t.thread_name for t in dump]
    assert "Reference Handler" in names, names  # every JVM has it
    for info in dump:
        assert info.stringified.startswith(f'"{info.thread_name}" Id=')
        assert "(Spark JVM)" in info.stringified.splitlines()[0]
        assert info.stringified.count("\tat ") <= 3
