"""``SqliteTables``: rule results inserted into SQLite tables, on one writer thread.

A rule's ``sqlite`` action appends ``(action, table, row)`` on the loop; the writer
thread (``gateway.components.BatchWriter``) inserts each loop turn's rows in one
transaction. A table is created on its first row with one column per field (INTEGER,
REAL, TEXT or BLOB from the first value; objects and lists stored as JSON text), and a
column is added when a row brings a new field. SQLite's names of tables and columns are
case-insensitive (ASCII letters): a field ``V`` goes into an existing column ``v`` (a
table made before names kept their case, or by another rule), as SQLite's INSERT puts
it, rather than adding a column SQLite takes as the same. Every table also has ``_rowid``
(INTEGER PRIMARY KEY) and ``_at`` (insert time, ms). The database runs in WAL mode, so
other processes can read it while the gateway writes.

An integer outside SQLite's signed 64-bit range (a DDS ``uint64`` above 2**63 - 1) is
bound as the TEXT of its decimal digits, which loses nothing (a column it creates is
TEXT; SQLite's own affinity turns that text into REAL in an INTEGER or REAL column).

One bad row loses only itself: when a batch fails, it is rolled back and its rows are
inserted again one by one, each committed on its own, so the rows that can be written
are, and each one that cannot counts ``failed`` on the action that queued it (which
logs why, naming the table). An error of the database itself (full, locked, read-only,
I/O, corrupt, cannot open) fails the rows it reaches without retrying them one by one.
The counts are made on the event loop, where the actions count everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol

from gateway.components import BatchWriter
from gateway.rules.functions import to_json

__all__ = ["SqliteTables"]

log = logging.getLogger(__name__)

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# Primary result codes of errors of the database rather than of a row: retrying the
# batch's rows one by one would fail each the same way (or wait out the busy timeout).
_DATABASE_ERRORS = frozenset(
    {
        5,  # SQLITE_BUSY
        6,  # SQLITE_LOCKED
        7,  # SQLITE_NOMEM
        8,  # SQLITE_READONLY
        10,  # SQLITE_IOERR
        11,  # SQLITE_CORRUPT
        13,  # SQLITE_FULL
        14,  # SQLITE_CANTOPEN
        15,  # SQLITE_PROTOCOL
        26,  # SQLITE_NOTADB
    }
)


class Counted(Protocol):
    succeeded: int

    def fail(self, problem: object) -> None: ...


Item = tuple[Counted, str, dict[str, Any]]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _fold(name: str) -> str:
    """``name`` as SQLite compares table and column names: ASCII letters in any case."""
    return name.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _column_type(value: Any) -> str:
    if isinstance(value, bool):
        return "INTEGER"
    if isinstance(value, int):
        return "INTEGER" if _INT64_MIN <= value <= _INT64_MAX else "TEXT"
    if isinstance(value, float):
        return "REAL"
    if isinstance(value, bytes):
        return "BLOB"
    return "TEXT"


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, float | str | bytes):
        return value
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _INT64_MAX else str(value)
    return to_json(value)


def _of_database(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, OSError) or (isinstance(code, int) and (code & 0xFF) in _DATABASE_ERRORS)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class SqliteTables:
    """One SQLite database file and the tables rules write to; see the module."""

    def __init__(self, path: Path, max_pending: int = 100_000) -> None:
        self.path = path
        self._loop = asyncio.get_running_loop()
        self._connection: sqlite3.Connection | None = None  # the writer thread's
        # table -> its columns, both as _fold gives them (writer thread only)
        self._columns: dict[str, set[str]] = {}
        self._writer: BatchWriter[Item] = BatchWriter(
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

    @staticmethod
    def _count(outcomes: list[tuple[Item, str | None]]) -> None:
        """On the loop: each row's outcome on the action that queued it."""
        for (counts, table, _), problem in outcomes:
            if problem is None:
                counts.succeeded += 1
            else:
                counts.fail(f"table {table}: {problem}")

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
        known = self._columns.get(_fold(table))
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
                known = {"_rowid", "_at", *map(_fold, row)}
            else:
                known = {_fold(str(column[1])) for column in found}
            self._columns[_fold(table)] = known
        for name, value in row.items():
            if _fold(name) not in known:
                connection.execute(
                    f"ALTER TABLE {_quote(table)} ADD COLUMN {_quote(name)} {_column_type(value)}"
                )
                known.add(_fold(name))

    def _insert(self, connection: sqlite3.Connection, now: int, table: str,
                row: dict[str, Any]) -> None:  # fmt: skip
        self._ensure(connection, table, row)
        names = ", ".join(["_at", *(_quote(k) for k in row)])
        marks = ", ".join("?" * (len(row) + 1))
        connection.execute(
            f"INSERT INTO {_quote(table)} ({names}) VALUES ({marks})",
            [now, *(_cell(v) for v in row.values())],
        )

    def _rollback(self, connection: sqlite3.Connection) -> None:
        self._columns.clear()  # a rolled-back CREATE / ALTER
        try:
            connection.rollback()
        except sqlite3.Error as exc:
            log.warning("rules: rolling back %s failed: %s", self.path, exc)

    def _write(self, items: list[Item]) -> None:
        outcomes: list[tuple[Item, str | None]]
        try:
            outcomes = self._write_batch(items)
        except Exception as exc:  # counted on the rows' actions, which log it
            outcomes = [(item, _reason(exc)) for item in items]
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody reads the counts
            self._loop.call_soon_threadsafe(self._count, outcomes)

    def _write_batch(self, items: list[Item]) -> list[tuple[Item, str | None]]:
        """Every row of ``items`` in one transaction; if that fails, each in its own."""
        connection = self._connect()
        now = time.time_ns() // 1_000_000
        try:
            for _, table, row in items:
                self._insert(connection, now, table, row)
            connection.commit()
        except Exception as exc:  # the rows are tried one by one below
            self._rollback(connection)
            if _of_database(exc) or len(items) == 1:
                return [(item, _reason(exc)) for item in items]
            log.debug("rules: a batch of %d rows to %s failed (%s): retrying them one by one",
                      len(items), self.path, _reason(exc))  # fmt: skip
            return self._write_each(connection, now, items)
        return [(item, None) for item in items]

    def _write_each(self, connection: sqlite3.Connection, now: int,
                    items: list[Item]) -> list[tuple[Item, str | None]]:  # fmt: skip
        outcomes: list[tuple[Item, str | None]] = []
        for index, item in enumerate(items):
            _, table, row = item
            try:
                self._insert(connection, now, table, row)
                connection.commit()
            except Exception as exc:  # this row's failure, counted and logged
                self._rollback(connection)
                outcomes.append((item, _reason(exc)))
                if _of_database(exc):  # the rest would fail the same way
                    outcomes.extend((rest, _reason(exc)) for rest in items[index + 1 :])
                    break
            else:
                outcomes.append((item, None))
        return outcomes
