"""The embedded Spark Connect server's driver JVM options (no Spark started)."""

from __future__ import annotations

import pytest

from flintlock.runtime.spark.session import DEFAULT_GC, driver_memory, embedded_java_options


@pytest.mark.parametrize(("user", "collector"), [
    ("", DEFAULT_GC),
    ("-Xss4m", DEFAULT_GC),
    ("-XX:MaxGCPauseMillis=50", DEFAULT_GC),   # tunes a collector, does not pick one
    ("-XX:+UseG1GC", "-XX:+UseG1GC"),
    ("-XX:+UseZGC -Xss4m", "-XX:+UseZGC"),
])
def test_parallel_gc_unless_the_user_picks_a_collector(user: str, collector: str) -> None:
    options = embedded_java_options(user).split()
    gcs = [o for o in options if o.startswith("-XX:+Use") and o.endswith("GC")]
    assert gcs == [collector]
    assert all(o in options for o in user.split())
    assert sum("log4j2.configurationFile" in o for o in options) == 1


def test_a_users_log4j_configuration_is_kept() -> None:
    options = embedded_java_options("-Dlog4j2.configurationFile=file:/mine.properties")
    assert options.count("log4j2.configurationFile") == 1 and "/mine.properties" in options


def test_the_heap_is_fixed_at_the_driver_memory_unless_the_user_sets_its_initial_size() -> None:
    options = embedded_java_options("-Xss4m", "3g").split()
    assert options[0] == "-Xms3g" and "-Xss4m" in options
    assert [o for o in embedded_java_options("-Xms512m", "3g").split()
            if o.startswith("-Xms")] == ["-Xms512m"]  # the user's own initial heap
    assert "-Xms" not in embedded_java_options("")  # no memory known: the JVM's default


def test_the_driver_memory_is_what_spark_submit_gives_to_xmx(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_DRIVER_MEMORY", raising=False)
    monkeypatch.delenv("SPARK_MEM", raising=False)
    assert driver_memory({}) == "1g"  # Spark's default
    monkeypatch.setenv("SPARK_MEM", "2g")
    assert driver_memory({}) == "2g"
    monkeypatch.setenv("SPARK_DRIVER_MEMORY", "1536m")
    assert driver_memory({}) == "1536m"
    assert driver_memory({"spark.driver.memory": "4g"}) == "4g"
