"""Sources and sinks: files (Parquet/CSV/JSON/text, also monitored continuously), collections,
sequences, generated data (DataGeneratorSource), a TCP socket (SocketTextSource), print, collect."""

from __future__ import annotations

from flintlock.connectors.base import Sink, Source
from flintlock.connectors.collection import CollectionSource, RowRangeSplit, SequenceSource
from flintlock.connectors.datagen import (
    DataGeneratorSource,
    GeneratorSplit,
    RateLimiterStrategy,
)
from flintlock.connectors.exceptions import SinkException, SourceException
from flintlock.connectors.file import FileSink, FileSource, FileSplit, MonitoredFilesSplit
from flintlock.connectors.sinks import CollectSink, PrintSink
from flintlock.connectors.socket import SocketTextSource

__all__ = [
    "CollectSink",
    "CollectionSource",
    "DataGeneratorSource",
    "FileSink",
    "FileSource",
    "FileSplit",
    "GeneratorSplit",
    "MonitoredFilesSplit",
    "PrintSink",
    "RateLimiterStrategy",
    "RowRangeSplit",
    "SequenceSource",
    "Sink",
    "SinkException",
    "SocketTextSource",
    "Source",
    "SourceException",
]
