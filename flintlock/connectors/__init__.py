"""Sources and sinks: files (Parquet/CSV/JSON/text), collections, sequences, print, collect."""

from __future__ import annotations

from flintlock.connectors.base import Sink, Source
from flintlock.connectors.collection import CollectionSource, RowRangeSplit, SequenceSource
from flintlock.connectors.exceptions import SinkException, SourceException
from flintlock.connectors.file import FileSink, FileSource, FileSplit
from flintlock.connectors.sinks import CollectSink, PrintSink

__all__ = [
    "CollectSink",
    "CollectionSource",
    "FileSink",
    "FileSource",
    "FileSplit",
    "PrintSink",
    "RowRangeSplit",
    "SequenceSource",
    "Sink",
    "SinkException",
    "Source",
    "SourceException",
]
