"""Network security helpers (Flink ``org.apache.flink.runtime.net``)."""
