"""Log output as the ``logging:`` section says: text or JSON lines, on standard error
or in a file rotated by size.

``configure_logging`` is for the CLI, the one place that installs handlers. A JSON line
is one object: ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
``message``, ``client_id`` when the record carries one (the broker logs a client's
connect, refusal and disconnect with ``extra={"client_id": ...}``) and ``exception``
(the formatted traceback) when there is one. Non-ASCII is escaped, so every line is
ASCII and a newline in a message never splits a line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.config import LoggingConfig


__all__ = ["TEXT_FORMAT", "JsonFormatter", "configure_logging", "log_handler"]

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, object] = {
            "time": time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        client_id = getattr(record, "client_id", None)
        if client_id is not None:
            entry["client_id"] = client_id
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


def log_handler(config: LoggingConfig) -> logging.Handler:
    """The handler ``config`` asks for, with its formatter."""
    handler: logging.Handler
    if config.file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        # only for a log file: ~0.25 MB the defaults do not need
        from logging.handlers import RotatingFileHandler, WatchedFileHandler

        if config.max_size:
            handler = RotatingFileHandler(
                config.file, maxBytes=config.max_size, backupCount=config.backups, encoding="utf-8"
            )
        else:  # rotated by an outside tool: reopen the file when it moves
            handler = WatchedFileHandler(config.file, encoding="utf-8")
    json_lines = config.format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    return handler


def configure_logging(config: LoggingConfig) -> None:
    """Replaces the root logger's handlers with the one ``config`` asks for; Python's
    warnings go there too (logger ``py.warnings``), so a JSON log stays JSON."""
    logging.basicConfig(
        level=getattr(logging, config.level.upper()), handlers=[log_handler(config)], force=True
    )
    logging.captureWarnings(True)
