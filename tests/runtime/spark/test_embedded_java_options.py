"""The embedded Spark Connect server's driver JVM options (no Spark started)."""

from __future__ import annotations

import pytest

from flintlock.runtime.spark.session import DEFAULT_GC, embedded_java_options


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
