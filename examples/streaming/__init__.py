"""Streaming examples: word count over a watched directory, hourly departures per airport in
event time, and carrier delay alerts from a keyed process function (see ``examples/README.md``)."""
