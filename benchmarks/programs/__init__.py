"""Programs the harness runs as separate processes (one per system); see ``benchmarks.systems``."""
