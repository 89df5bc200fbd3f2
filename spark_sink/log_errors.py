"""The stream log's errors (``spark_sink.segments.StreamLog``)::

    EdgebusError (broker_core.errors)
    └── StreamLogError       the log cannot be opened or written: its files are damaged,
        │                    missing, or another writer holds the directory
        ├── RecordsDeleted   records a reader asked for were deleted by retention
        └── DamagedBatch     a batch a reader asked for is damaged on disk
"""

from __future__ import annotations

from broker_core.errors import EdgebusError

__all__ = ["DamagedBatch", "RecordsDeleted", "StreamLogError"]


class StreamLogError(EdgebusError):
    """The stream log cannot be opened or written (its files are damaged or missing)."""


class RecordsDeleted(StreamLogError):
    """Records a reader asked for were deleted by retention (before or while reading)."""


class DamagedBatch(StreamLogError):
    """A batch a reader asked for is damaged on disk (its CRC does not match)."""
