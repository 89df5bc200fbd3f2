"""``SqliteTables``: rule results inserted into SQLite tables, on one writer thread.

A rule's ``sqlite`` action appends ``(action, table, row)`` on the loop; the writer
thread (``gateway.components.BatchWriter``) inserts each loop turn's rows in one
transaction. A table is created on its first row with one column per field (INTEGER,
REAL, TEXT or BLOB from the first value; objects and lists stored as JSON text), and a
column is added when a row brings a new field. Every table also has ``_rowid``
(INTEGER PRIMARY KEY) and ``_at`` (insert time, ms). The database runs in WAL mode, so
other processes can read it while the gateway writes.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol

from gateway.components import BatchWriter
from gateway.rules.functions import to_json

__all__ = ["SqliteTables"]

log = logging.getLogger(__name__)


class Counted(Protocol):
    succeeded: int
    failed: int


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _column_type(value: Any) -> str:
    if isinstance(value, bool | int):
        return "INTEGER"
    if isinstance(value, float):
        return "REAL"
    if isinstance(value, bytes):
        return "BLOB"
    return "TEXT"


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    return to_json(value)


class SqliteTables:
    """One SQLite database file and the tables rules write to; see the module."""

    def __init__(self, path: Path, max_pending: int = 100_000) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None  # the writer thread's
        self._columns: dict[str, set[str]] = {}  # table -> columns (writer thread only)
        self._writer: BatchWriter[tuple[Counted, str, dict[str, Any]]] = BatchWriter(
            self._write, f"rules-sqlite-{path.name}", max_pending=max_pending
        )

    @property
    def pending(self) -> int:
        return self._writer.pending

    def insert(self, counts: Counted, table: str, row: dict[str, Any]) -> bool:
        """Queues ``row`` for ``table``; False (nothing queued) when the writer is past
        its backlog limit."""
        if self._writer.backlogged():
            return False
        self._writer.append((counts, table, row))
        return True

    def close(self) -> None:
        self._writer.close()

    # -- the writer thread --------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            self._connection = connection
        return self._connection

    def _ensure(self, connection: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
        known = self._columns.get(table)
        if known is None:
            found = connection.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
            if not found:
                columns = ", ".join(f"{_quote(k)} {_column_type(v)}" for k, v in row.items())
                extra = f", {columns}" if columns else ""
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {_quote(table)} "
                    f"(_rowid INTEGER PRIMARY KEY, _at INTEGER{extra})"
                )
                log.info("rules: created table %s in %s", table, self.path)
                known = {"_rowid", "_at", *row}
            else:
                known = {str(column[1]) for column in found}
            self._columns[table] = known
        for name, value in row.items():
            if name not in known:
                connection.execute(
                    f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(name)} {_column_type(value)}"
                )
                known.add(name)

    def _write(self, items: list[tuple[Counted, str, dict[str, Any]]]) -> None:
        connection = self._connect()
        now = time.time_ns() // 1_000_000
        try:
            for _, table, row in items:
                self._ensure(connection, table, row)
                names = ", ".join(["_at", *(_quote(k) for k in row)])
                marks = ", ".join("?" * (len(row) + 1))
                connection.execute(
                    f"INSERT INTO {_quote(table)} ({names}) VALUES ({marks})",
                    [now, *(_cell(v) for v in row.values())],
                )
            connection.commit()
        except (sqlite3.Error, ValueError) as exc:
            connection.rollback()
            self._columns.clear()  # a rolled-back CREATE / ALTER
            for counts, _, _ in items:
                counts.failed += 1
            log.warning("rules: writing %d rows to %s failed: %s", len(items), self.path, exc)
            return
        for counts, _, _ in items:
            counts.succeeded += 1
