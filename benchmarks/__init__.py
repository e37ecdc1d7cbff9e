"""The flintlock benchmark harness: ``python -m benchmarks run|report`` (docs/benchmarks.md)."""
