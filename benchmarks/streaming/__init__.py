"""Streaming benchmarks: flintlock against Spark Structured Streaming (see ``__main__``)."""
